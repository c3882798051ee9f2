"""``toolkit audit SCRIPT``, the principle of a gradient the script takes itself, in cases written
blind (from the principle and the published methods, not from the rule that judges them): many
published methods do not call ``backward()`` on their loss. They take its gradient with
``torch.autograd.grad`` over the tensors an optimizer steps, change it (project one task's
gradient off another's, combine the tasks' gradients, clip each unit or each example, add
noise) and write the result into those tensors' ``.grad`` before the optimizer's step. That
loss trains the tensors as a ``backward()`` of it would: it is audited as one. A target in it
that carries gradient into the tensors it trains (a TD target, a consistency target, a
SimSiam target left uncut) is the same failure as in a loss a ``backward()`` differentiates:
the audit fails naming the line of the missing cut (where the target is made, or a line where
it is read, each listed per case) and the stepped tensors it wrongly trains, and its
``--apply`` edit makes the script train as the published one. The closing lines say nothing of
such a loss as not checked. A gradient taken on purpose inside a loss (a gradient penalty) and
a meta-gradient written by hand whose only targets are labels are no finding. The kind and
wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published method's script and a bug twin that
differ in one line of code, the cut:

- PCGrad (Yu et al., "Gradient Surgery for Multi-Task Learning", NeurIPS 2020,
  arXiv:2001.06782, Algorithm 1; each task's gradient by ``torch.autograd.grad`` as
  median-research-group/LibMTL takes it in its autograd mode) over two Q-learning tasks on a
  shared trunk, the TD target read from the online network and cut with ``.detach()``. The bug
  twin leaves the target uncut (``target = rewards[task, s, a] + args.gamma * next_q``). The fix
  is that line; a cut of ``next_q`` where it is made, or of the target where the loss reads it,
  is as right.
- CAGrad (Liu et al., "Conflict-Averse Gradient Descent for Multi-task Learning", NeurIPS 2021,
  arXiv:2110.14048; Cranial-XIX/CAGrad, ``overwrite_grad``) balancing a labelled cross-entropy
  and UDA's consistency (Xie et al., arXiv:1904.12848), whose sharpened target is cut. The bug
  twin leaves it uncut. The fix is the target's line; a cut where the KL reads it is as right.
- SimSiam (Chen and He, arXiv:2011.10566, Algorithm 1) with adaptive gradient clipping (Brock et
  al., arXiv:2102.06171, section 4.1), the gradient clipped unit by unit before it is written.
  The bug twin leaves the second term's target ``z1`` uncut. The fix is that line.
- DP-SGD (Abadi et al., arXiv:1607.00133, Algorithm 1) on semi-gradient TD(0) (Sutton and
  Barto, 2nd ed., section 9.3), each transition's gradient by its own ``torch.autograd.grad``,
  clipped, the sum noised. The bug twin leaves the bootstrap value uncut. The fix is the
  target's line; a cut where the bootstrap value is made or where the loss reads the target is
  as right.

Must not be flagged: the four published scripts, the R1 penalty of a GAN's discriminator, a
gradient taken with ``create_graph=True`` inside a loss one ``backward()`` differentiates
(Mescheder et al., arXiv:1801.04406; LMescheder/GAN_stability), and first-order MAML whose
meta-gradient, taken over the adapted weights, is written into the shared weights' ``.grad``
(Finn et al., arXiv:1703.03400, section 5.2; Nichol et al., arXiv:1803.02999).

Without the audit, the last test checks that each bug is the bug: run to their end, the twins
save different weights.
"""

from __future__ import annotations

import difflib

import pytest
import torch
from script_audit import (
    SCRIPTS,
    assert_trains_as,
    audit,
    cli,
    failures,
    project,
    recorded,
    trained,
)

#: the audit's options: the first two iterations
STEPS = ("--steps", "2")

#: PCGrad over two Q-learning tasks: the TD target from the online network uncut
PC_BUGGY = "pcgrad_multitask_q_target_kept.py"
PC_CLEAN = "pcgrad_multitask_q.py"
PC_LINE = 49
PC_ALSO = (48, 50)
PC_BUG = "        target = rewards[task, s, a] + args.gamma * next_q"
PC_FIX = "        target = rewards[task, s, a] + args.gamma * next_q.detach()"
PC_NAMES = ("trunk", "heads")

#: CAGrad balancing a cross-entropy and UDA's consistency: the consistency target uncut
CA_BUGGY = "cagrad_uda_consistency_target_kept.py"
CA_CLEAN = "cagrad_uda_consistency.py"
CA_LINE = 46
CA_ALSO = (48,)
CA_BUG = "    target = F.softmax(model(u) / args.temperature, dim=1)"
CA_FIX = "    target = F.softmax(model(u) / args.temperature, dim=1).detach()"
CA_NAMES = ("model",)

#: SimSiam with adaptive gradient clipping: the second term's target uncut
SS_BUGGY = "simsiam_agc_target_kept.py"
SS_CLEAN = "simsiam_agc.py"
SS_LINE = 46
SS_ALSO: tuple[int, ...] = ()
SS_BUG = "    d21 = F.cosine_similarity(p2, z1).mean()"
SS_FIX = "    d21 = F.cosine_similarity(p2, z1.detach()).mean()"
SS_NAMES = ("encoder",)

#: DP-SGD on TD(0): the bootstrap value uncut
DP_BUGGY = "dpsgd_td_value_bootstrap_kept.py"
DP_CLEAN = "dpsgd_td_value.py"
DP_LINE = 43
DP_ALSO = (42, 44)
DP_BUG = "        target = reward[i] + args.gamma * alive[i] * bootstrap"
DP_FIX = "        target = reward[i] + args.gamma * alive[i] * bootstrap.detach()"
DP_NAMES = ("value",)

PAIRS = [
    pytest.param(PC_BUGGY, PC_CLEAN, PC_LINE, PC_ALSO, PC_NAMES, id="pcgrad-td-target"),
    pytest.param(CA_BUGGY, CA_CLEAN, CA_LINE, CA_ALSO, CA_NAMES, id="cagrad-uda-target"),
    pytest.param(SS_BUGGY, SS_CLEAN, SS_LINE, SS_ALSO, SS_NAMES, id="simsiam-agc-target"),
    pytest.param(DP_BUGGY, DP_CLEAN, DP_LINE, DP_ALSO, DP_NAMES, id="dpsgd-td-bootstrap"),
]
TWINS = [
    pytest.param(PC_BUGGY, PC_CLEAN, PC_LINE, PC_BUG, PC_FIX, id="pcgrad-td-target"),
    pytest.param(CA_BUGGY, CA_CLEAN, CA_LINE, CA_BUG, CA_FIX, id="cagrad-uda-target"),
    pytest.param(SS_BUGGY, SS_CLEAN, SS_LINE, SS_BUG, SS_FIX, id="simsiam-agc-target"),
    pytest.param(DP_BUGGY, DP_CLEAN, DP_LINE, DP_BUG, DP_FIX, id="dpsgd-td-bootstrap"),
]
CLEAN = [
    pytest.param(PC_CLEAN, id="pcgrad-td-target-cut"),
    pytest.param(CA_CLEAN, id="cagrad-uda-target-cut"),
    pytest.param(SS_CLEAN, id="simsiam-agc-targets-cut"),
    pytest.param(DP_CLEAN, id="dpsgd-td-bootstrap-cut"),
    pytest.param("r1_penalty_gan.py", id="r1-penalty-inside-the-loss"),
    pytest.param("fomaml_meta_grad_by_hand.py", id="first-order-maml-meta-gradient"),
]
#: every script of a pair: its loss is differentiated by torch.autograd.grad alone
WRITTEN = [
    pytest.param(name, id=name.removesuffix(".py"))
    for name in (PC_BUGGY, PC_CLEAN, CA_BUGGY, CA_CLEAN, SS_BUGGY, SS_CLEAN, DP_BUGGY, DP_CLEAN)
]


def lines(name: str) -> list[str]:
    return (SCRIPTS / name).read_text().splitlines()


def docstring_end(text: list[str]) -> int:
    """The number of the line that closes the module docstring (the scripts open with one)."""
    assert text[0].startswith('"""')
    return next(n for n, line in enumerate(text[1:], 2) if line.endswith('"""'))


def at_lines(finding: dict, script: str) -> set[int]:
    """The lines of ``script`` a finding is about."""
    return {int(at.split(":")[1]) for at in finding["at"] if at.startswith(f"{script}:")}


def named(report: dict, script: str, allowed: set[int]) -> list[dict]:
    """The failures about one of the ``allowed`` lines of ``script``."""
    return [f for f in failures(report) if at_lines(f, script) & allowed]


def names_the_tensor(finding: dict, wanted: tuple[str, ...]) -> bool:
    """Whether one of the finding's names holds one of ``wanted`` as a dotted part
    (``trunk`` in ``trunk.0.weight``, ``value`` in ``value.2.bias``)."""
    return any(f".{want}." in f".{name}." for name in finding["names"] for want in wanted)


def changed_lines(before: list[str], after: list[str]) -> set[int]:
    """The lines of ``before`` (1-based) an edit changed; an insertion counts as the line it
    follows."""
    out: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            out |= set(range(i1 + 1, i2 + 1)) if i2 > i1 else {i1}
    return out


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_twins_differ_only_by_the_cut(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_the_failure_names_the_cut_and_the_tensors(tmp_path, buggy, clean, line, also, names):
    code, report = audit(tmp_path, SCRIPTS / buggy, *STEPS)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_the_failure_is_found_at_the_first_iteration(tmp_path, buggy, clean, line, also, names):
    code, report = audit(tmp_path, SCRIPTS / buggy, *STEPS)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == 0


@pytest.mark.parametrize("script", WRITTEN)
def test_the_loss_behind_a_written_gradient_is_not_left_unchecked(tmp_path, script):
    _, report = audit(tmp_path, SCRIPTS / script, *STEPS)
    unchecked = [line for line in report["not_checked"] if "torch.autograd.grad" in line]
    assert unchecked == []


@pytest.mark.parametrize("script", CLEAN)
def test_a_published_cut_or_a_gradient_taken_on_purpose_is_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script, *STEPS)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(
    tmp_path, buggy, clean, line, also, names
):
    folder = project(tmp_path, buggy, clean)
    done = cli(*STEPS, "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    # the written edit: one line, the cut or a line whose edit is as right, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm="")
    )
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *STEPS))
    assert_trains_as(folder, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_each_bug_changes_what_the_script_trains(tmp_path, buggy, clean, line, also, names):
    folder = project(tmp_path, buggy, clean)
    ours, theirs = trained(folder, "train.py", "published.py")
    assert ours.keys() == theirs.keys()
    assert any(not torch.allclose(ours[k], theirs[k], rtol=1e-4, atol=1e-5) for k in theirs)
