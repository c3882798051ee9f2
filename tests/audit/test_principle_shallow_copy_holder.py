"""``toolkit audit SCRIPT``, the principle of a shallow copy of what holds a trained network:
``copy.copy(x)`` makes a new outer object whose contents are the original's own objects. When
``x`` holds a network that an optimizer trains (a dict or a list, an ``nn.ModuleList``, a plain
object, or the module itself), the copy's network is the original: training, calling or
writing the weights of "the copy" acts on the original. The published scripts make the copy
with ``copy.deepcopy(x)``. The failure names the ``copy.copy`` line, and its edit there makes
the copy deep, which makes the bug twin train exactly as the published script. The kind and
wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in that one line:

- a dict holding a network: evolutionary reinforcement learning (Khadka and Tumer,
  "Evolution-Guided Policy Gradient in Reinforcement Learning", NeurIPS 2018,
  arXiv:1805.07917; ShawK91/erl_paper_nips18, ``rl_to_evo``): after each generation the worst
  member of the evolved population is replaced by a copy of the RL agent's record
  ``{"actor": ..., "fitness": ...}``. Shallow, the member's actor is the actor DDPG trains, and
  evolution clones into it and mutates it.
- an ``nn.ModuleList`` of trained layers: Net2DeeperNet (Chen, Goodfellow and Shlens,
  "Net2Net: Accelerating Learning via Knowledge Transfer", ICLR 2016, arXiv:1511.05641;
  erogol/Net2Net, ``deeper``): a deeper student made from the teacher's hidden layers and an
  identity layer, trained with its own optimizer while the teacher trains on. Shallow, both
  optimizers step the teacher's layers.
- a plain object holding a network and its optimizer: the learning-rate range test (Smith,
  "Cyclical Learning Rates for Training Neural Networks", WACV 2017, arXiv:1506.01186;
  davidtvs/pytorch-lr-finder, ``LRFinder.range_test``): a probe learner made from the learner
  runs the test up to diverging rates, then the learner trains at the rate it picked.
  Shallow, the test trains the learner's own weights.

Must not be flagged: the three published scripts; successive halving (Jamieson and Talwalkar,
AISTATS 2016; Hyperband, Li et al., JMLR 2018; zygmuntz/hyperband), whose ``copy.copy`` copies
a dict of hyperparameters, the script's argument namespace and a list of scores, none holding
a network; and temperature-scaled validation (Guo, Pleiss, Sun and Weinberger, "On Calibration
of Modern Neural Networks", ICML 2017; gpleiss/temperature_scaling), whose shallow copy of the
classifier, with a temperature of its own, is read at once under ``torch.no_grad()``, before
any step and by no optimizer, and so computes what a deep copy would.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: a dict holding the trained actor, copied into the population
ERL_BUGGY = "erl_sync_shallow_copy.py"
ERL_CLEAN = "erl_sync.py"
ERL_LINE = 98
ERL_BUG = "    population[worst] = copy.copy(rl)"
ERL_FIX = "    population[worst] = copy.deepcopy(rl)"

#: an ``nn.ModuleList`` of the teacher's trained layers, copied for the student
NET2NET_BUGGY = "net2deeper_shallow_copy.py"
NET2NET_CLEAN = "net2deeper.py"
NET2NET_LINE = 73
NET2NET_BUG = "blocks = copy.copy(teacher.blocks)"
NET2NET_FIX = "blocks = copy.deepcopy(teacher.blocks)"

#: a plain object holding the network and its optimizer, copied for the range test's probe
RANGE_BUGGY = "lr_range_test_shallow_copy.py"
RANGE_CLEAN = "lr_range_test.py"
RANGE_LINE = 61
RANGE_BUG = "probe = copy.copy(learner)"
RANGE_FIX = "probe = copy.deepcopy(learner)"

PAIRS = [pytest.param(ERL_BUGGY, ERL_CLEAN, ERL_LINE, id="erl-dict"),
         pytest.param(NET2NET_BUGGY, NET2NET_CLEAN, NET2NET_LINE, id="net2net-module-list"),
         pytest.param(RANGE_BUGGY, RANGE_CLEAN, RANGE_LINE, id="lr-range-test-object")]

TWINS = [pytest.param(ERL_BUGGY, ERL_CLEAN, ERL_LINE, ERL_BUG, ERL_FIX, id="erl-dict"),
         pytest.param(NET2NET_BUGGY, NET2NET_CLEAN, NET2NET_LINE, NET2NET_BUG, NET2NET_FIX,
                      id="net2net-module-list"),
         pytest.param(RANGE_BUGGY, RANGE_CLEAN, RANGE_LINE, RANGE_BUG, RANGE_FIX,
                      id="lr-range-test-object")]


def lines(name: str) -> list[str]:
    return (SCRIPTS / name).read_text().splitlines()


def docstring_end(text: list[str]) -> int:
    """The number of the line that closes the module docstring (the scripts open with one)."""
    assert text[0].startswith('"""')
    return next(n for n, line in enumerate(text[1:], 2) if line.endswith('"""'))


def code_changes(buggy: list[str], clean: list[str]) -> list[int]:
    """The lines, past the docstrings (of one length in both), where two scripts of one length
    differ."""
    doc = docstring_end(clean)
    assert docstring_end(buggy) == doc and len(buggy) == len(clean)
    return [n for n, (a, b) in enumerate(zip(buggy, clean), 1) if a != b and n > doc]


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_scripts_differ_only_at_the_copy(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    assert code_changes(ours, theirs) == [line]


@pytest.mark.parametrize(("buggy", "clean", "line"), PAIRS)
def test_the_failure_names_the_shallow_copy_and_deep_copies_it(tmp_path, buggy, clean, line):
    code, report = audit(tmp_path, SCRIPTS / buggy, "--watch", "1")
    assert code == 1
    found = failures(report)
    named = [f for f in found if any(at.startswith(f"{buggy}:{line}:") for at in f["at"])]
    assert named, [f["at"] for f in found]
    edits = [edit for f in named for edit in f["edits"]]
    assert any(edit["start"][0] == line and "deepcopy" in edit["new"] for edit in edits), edits


@pytest.mark.parametrize("script", [
    ERL_CLEAN, NET2NET_CLEAN, RANGE_CLEAN, "successive_halving.py",
    "temperature_scaled_eval.py"],
    ids=["erl", "net2net", "lr-range-test", "successive-halving-copies-numbers",
         "temperature-scaled-copy-read-at-once"])
def test_deep_copies_and_copies_of_no_trained_network_are_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script, "--watch", "1")
    assert code == 0 and failures(report) == []


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line"), PAIRS)
def test_the_deep_copy_is_verified_and_trains_as_the_published_script(tmp_path, buggy, clean,
                                                                      line):
    folder = project(tmp_path, buggy, clean)
    done = cli("--watch", "1", "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", "--watch", "1"))
    assert_trains_as(folder)
