"""``toolkit audit SCRIPT``, the principle of a target read by a later backward: in one training
iteration a network's output is used twice. A first ``backward()`` trains the network through
it as a prediction (a cross-entropy with the labels, keeping the graph), and a later
``backward()`` of the same iteration, before the one optimizer step, reads a value made from
it as a target (a softened distribution, an aggregate of it). The published script cuts that
target (``.detach()`` where it is made); the bug twin drops the cut, so the later backward
also trains the network through the target's side. The fix belongs on the target's own path
(the line that makes it, or the call that passes it), never on the shared output: cutting the
output itself also cuts the first backward's prediction, and the script raises or trains
differently. The bug is there from the first optimizer update of the loop that holds it. The
kind and wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
by the cut alone:

- on-the-fly native ensemble (Lan, Zhu and Gong, "Knowledge Distillation by On-the-Fly Native
  Ensemble", NeurIPS 2018, arXiv:1806.04606; Lan1991Xu/ONE_NeurIPS2018): branches on shared
  layers and a gate that weighs them into the ensemble teacher; the branches and the ensemble
  are trained by cross-entropy (a backward that keeps the graph), then the ensemble's softened
  logits are distilled into each branch, one backward per branch, through a helper
  ``kl_loss(student_logits, teacher_logits, T)``. The bug twin's helper makes its soft target
  without ``.detach()``: the fix is that line in the helper (or, as well, the call that passes
  the ensemble's logits), not the ensemble's own output. Single phase: found at iteration 0.
- a depth-elastic supernet trained by the sandwich rule with in-place distillation (Yu et al.,
  "BigNAS", ECCV 2020, arXiv:2003.11142, as facebookresearch/AttentiveNAS implements it; the
  elastic depth of Cai et al., "Once-for-All", ICLR 2020, mit-han-lab/once-for-all): two
  phases, a warm-up of the full depth alone (one plain backward per step), then the sandwich:
  the full depth trained on the labels (its backward keeps the graph, the stem's output being
  shared by every depth), its softmax the soft target of the smallest depth and a random one,
  one backward each. The bug twin's soft target, in the sandwich only, is made without
  ``.detach()``: the fix is that line; cutting the full depth's logits raises. Found at the
  sandwich's first iteration.
- self-supervised label augmentation with self-distillation (Lee, Hwang and Shin,
  "Self-supervised Label Augmentation via Input Transformations", ICML 2020, arXiv:1910.05872;
  hankook/SLA): a joint (class, rotation) classifier and a single classifier trained on the
  labels (a backward that keeps the graph); the joint logits of four rotated copies, each read
  at its own rotation, aggregated into the single classifier's soft target (a second backward).
  The bug twin makes the soft target from the aggregated logits without ``.detach()``: the fix is
  that line (or, as well, the lines that aggregate the joint logits for the target only, or the
  target's argument in the KL call), not the joint logits. Single phase: found at iteration 0.

Must not be flagged: the three published scripts; a segmentation network trained by a
cross-entropy and a soft Dice loss on the same logits, each with its own backward (after
nnU-Net, Isensee et al., Nature Methods 2021; MIC-DKFZ/nnUNet): both are predictions, the Dice
term's softmax included, and the labels are the only target; and the SLA+SD script whose soft
target comes from a second, teacher forward under ``torch.no_grad()``, passed on with no
``.detach()``, having no graph to cut.
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains (the sandwich's two
#: phases each get theirs)
OPTIONS = ("--steps", "2")

#: the native ensemble: the helper's line that makes the soft target, the call that passes the
#: ensemble's logits, and the lines that make and return the shared output
ONE_BUGGY = "one_native_ensemble_target_with_graph.py"
ONE_CLEAN = "one_native_ensemble.py"
ONE_LINE = 62
ONE_BUG = "    q = F.softmax(teacher_logits / T, dim=1)"
ONE_FIX = "    q = F.softmax(teacher_logits / T, dim=1).detach()"
ONE_ALSO = (77,)
ONE_SHARED = (56, 57, 71)
ONE_NAMES = ("q", "teacher_logits", "ensemble")

#: the depth-elastic sandwich, two phases: the soft target's line, and the lines that make the
#: stem's output and the full depth's logits
SANDWICH_BUGGY = "elastic_depth_sandwich_target_with_graph.py"
SANDWICH_CLEAN = "elastic_depth_sandwich.py"
SANDWICH_LINE = 80
SANDWICH_BUG = "    soft_target = F.softmax(full_logits, dim=1)"
SANDWICH_FIX = "    soft_target = F.softmax(full_logits, dim=1).detach()"
SANDWICH_ALSO: tuple[int, ...] = ()
SANDWICH_SHARED = (76, 77)
SANDWICH_NAMES = ("soft_target", "full_logits")
#: the warm-up's steps at the script's defaults: the sandwich's first iteration (0-based)
SANDWICH_WARM_UP = 6

#: SLA+SD: the soft target's line; the aggregation of the joint logits (for the target alone)
#: and the KL call that passes the target; the line that makes the shared joint logits
SLA_BUGGY = "sla_self_distillation_target_with_graph.py"
SLA_CLEAN = "sla_self_distillation.py"
SLA_LINE = 71
SLA_BUG = "    soft_target = F.softmax(agg_logits / T, dim=1)"
SLA_FIX = "    soft_target = F.softmax(agg_logits.detach() / T, dim=1)"
SLA_ALSO = (69, 70, 72)
SLA_SHARED = (63,)
SLA_NAMES = ("soft_target", "agg_logits", "per_rotation", "joint_logits")

PAIRS = [
    pytest.param(ONE_BUGGY, ONE_CLEAN, ONE_LINE, ONE_ALSO, ONE_SHARED, ONE_NAMES, 0,
                 id="native-ensemble"),
    pytest.param(SANDWICH_BUGGY, SANDWICH_CLEAN, SANDWICH_LINE, SANDWICH_ALSO, SANDWICH_SHARED,
                 SANDWICH_NAMES, SANDWICH_WARM_UP, id="depth-sandwich-two-phase"),
    pytest.param(SLA_BUGGY, SLA_CLEAN, SLA_LINE, SLA_ALSO, SLA_SHARED, SLA_NAMES, 0,
                 id="sla-self-distillation"),
]
CUTS = [pytest.param(ONE_BUGGY, ONE_CLEAN, ONE_LINE, ONE_BUG, ONE_FIX, id="native-ensemble"),
        pytest.param(SANDWICH_BUGGY, SANDWICH_CLEAN, SANDWICH_LINE, SANDWICH_BUG, SANDWICH_FIX,
                     id="depth-sandwich-two-phase"),
        pytest.param(SLA_BUGGY, SLA_CLEAN, SLA_LINE, SLA_BUG, SLA_FIX,
                     id="sla-self-distillation")]


def lines(name: str) -> list[str]:
    return (SCRIPTS / name).read_text().splitlines()


def docstring_end(text: list[str]) -> int:
    """The number of the line that closes the module docstring (the scripts open with one)."""
    assert text[0].startswith('"""')
    return next(n for n, line in enumerate(text[1:], 2) if line.endswith('"""'))


def at_lines(finding: dict, script: str) -> set[int]:
    """The lines of ``script`` a finding is about."""
    return {int(at.split(":")[1]) for at in finding["at"] if at.startswith(f"{script}:")}


def edit_lines(finding: dict) -> set[int]:
    """The lines where a finding's edits start."""
    return {edit["start"][0] for edit in finding["edits"]}


def named(report: dict, script: str, allowed: set[int]) -> list[dict]:
    """The failures about one of the ``allowed`` lines of ``script``."""
    return [f for f in failures(report) if at_lines(f, script) & allowed]


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), CUTS)
def test_the_twins_differ_only_by_the_target_s_cut(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "shared", "names", "iteration"),
                         PAIRS)
def test_the_failure_names_the_target_s_line_and_not_the_shared_output(
        tmp_path, buggy, clean, line, also, shared, names, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *OPTIONS)
    assert code == 1
    allowed = {line, *also}
    found = named(report, buggy, allowed)
    assert found, [f["at"] for f in failures(report)]
    # an edit of the target's own path, made by a failure that names the target
    assert any(edit_lines(f) & allowed for f in found), [f["edits"] for f in found]
    assert any(set(names) & set(f["names"]) for f in found), [f["names"] for f in found]
    # no failure cuts the shared output: that would also cut the first backward's prediction
    for f in failures(report):
        assert not edit_lines(f) & set(shared), f["edits"]
        placed = at_lines(f, buggy)
        assert not placed or placed - set(shared), f["at"]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "shared", "names", "iteration"),
                         PAIRS)
def test_the_failure_is_found_at_the_first_update_it_spoils(
        tmp_path, buggy, clean, line, also, shared, names, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *OPTIONS)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize("script", [
    ONE_CLEAN, SANDWICH_CLEAN, SLA_CLEAN, "dice_ce_two_backward.py",
    "sla_self_distillation_teacher_pass_no_grad.py"],
    ids=["native-ensemble", "depth-sandwich-two-phase", "sla-self-distillation",
         "dice-and-ce-two-backward", "sla-teacher-pass-no-grad"])
def test_targets_cut_and_predictions_read_twice_are_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script, *OPTIONS)
    assert code == 0 and failures(report) == []


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line", "also", "shared", "names", "iteration"),
                         PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(
        tmp_path, buggy, clean, line, also, shared, names, iteration):
    folder = project(tmp_path, buggy, clean)
    done = cli(*OPTIONS, "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    # the written edit is on the target's own path
    before = (folder / "train.py.orig").read_text().splitlines()
    after = (folder / "train.py").read_text().splitlines()
    allowed = {line, *also}
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            assert set(range(i1 + 1, i2 + 1) if i2 > i1 else [i1]) <= allowed, (tag, i1, i2)
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *OPTIONS))
    assert_trains_as(folder, atol=1e-5)
