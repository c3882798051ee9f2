"""``toolkit audit SCRIPT``, the principle of one tensor stepped in turn by two optimizers,
each after a backward of its own (optimizer A steps it, then B, then A again, ...): it is
trained twice a round, with two optimizer states. Typically a list of "members" (agents,
ensemble members, workers) was made by multiplying a one-element list, ``[Net()] * k``, so
every member is the same network. The ``shared`` failure names the members' list, points at
the line that makes it, and its edit makes one network per member
(``[Net(...) for _ in range(k)]``), verified by rerunning the script. Audited every iteration
(``--watch 1``).

The cases (``tests/lens/audit/scripts/``): independent Q-learning (Tan, ICML 1993; the
non-shared IQL of EPyMARL, uoe-agents/epymarl), each agent its own Q-network and optimizer,
and its bug twin ``agents = [QNet()] * args.n_agents``.
Must not be flagged: the published independent learners; two optimizers over one model in
two phases, one after the other (unsupervised pre-training with SGD, then fine-tuning with
Adam: Erhan et al., JMLR 2010); one optimizer over a module list that repeats one block on
purpose (cross-layer parameter sharing, ALBERT: Lan et al., ICLR 2020).
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

from toolkit.audit.fixes.script_edits import apply_to_text, edit_at

BUGGY = "independent_q_learners_one_network.py"
CLEAN = "independent_q_learners.py"
#: the line of the bug twin that makes the members' list, and the published script's line there
LINE = 49
BUG = "agents = [QNet()] * args.n_agents"
FIX = "agents = [QNet() for _ in range(args.n_agents)]"


def test_the_scripts_differ_only_where_the_list_is_made():
    buggy = (SCRIPTS / BUGGY).read_text().splitlines()
    clean = (SCRIPTS / CLEAN).read_text().splitlines()
    assert buggy[LINE - 1] == BUG and clean[LINE - 1] == FIX
    assert len(buggy) == len(clean)
    # the docstrings say which is which; every line of code is the same but the list's
    assert [n for n, (a, b) in enumerate(zip(buggy, clean), 1) if a != b][-1] == LINE


def test_members_made_by_multiplying_a_list_are_one_network_named_and_made_apart(tmp_path):
    script = SCRIPTS / BUGGY
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "shared"
    assert found["names"] and any("agents" in name for name in found["names"]), found["names"]
    assert any(at.startswith(f"{BUGGY}:{LINE}:") for at in found["at"]), found["at"]
    (edit,) = found["edits"]
    assert edit["start"][0] == LINE
    text = script.read_text()
    fixed = apply_to_text(text, [edit_at(str(script), tuple(edit["start"]), tuple(edit["end"]),
                                         edit["new"])])
    lines = text.splitlines(keepends=True)
    lines[LINE - 1] = FIX + "\n"
    assert fixed == "".join(lines)


@pytest.mark.parametrize("script", [
    CLEAN,
    "pretrain_then_finetune.py",
    "tied_layers.py"], ids=["independent-learners", "two-phases", "tied-layers"])
def test_one_network_per_member_two_phases_or_tied_layers_are_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script, "--watch", "1")
    assert code == 0 and failures(report) == []


@pytest.mark.slow
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, BUGGY, CLEAN)
    applied(folder, "shared", "--watch", "1")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", "--watch", "1"))
    assert_trains_as(folder)


def test_two_phases_are_no_shared_finding(tmp_path):
    # the principle's own claim on the two-phase case: whatever else is found there, the
    # first optimizer never steps the model again once the second has, so nothing is shared
    _, report = audit(tmp_path, SCRIPTS / "pretrain_then_finetune.py", "--watch", "1")
    assert [f for f in failures(report) if f["kind"] == "shared"] == []
