"""``toolkit audit SCRIPT``, the principle of an iterative procedure whose earlier iterations are
cut: inside the forward of a training step an iteration hands a tensor on to the next (a
fixed-point solve, an unrolled inner optimisation, an iterative refinement, a recurrent
burn-in), and the published code cuts what the earlier iterations hand on (``.detach()``, or
those iterations run under ``torch.no_grad()``), so that the loss backpropagates through the
last iteration alone, or the last few, or each iteration separately. A bug twin omits that one
cut: the script trains otherwise (and holds a bigger graph). The audit fails on it, naming the
line where the cut belongs and the stepped tensors whose gradients it changes, and its
``--apply`` edit makes the script train exactly as the published one. Where a method
backpropagates through every iteration on purpose, there is no finding: a cut there would be
the bug. The kind and wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the cut:

- an iterative bounding-box refinement on 1-D signals (Zhu et al., "Deformable DETR:
  Deformable Transformers for End-to-End Object Detection", ICLR 2021, arXiv:2010.04159;
  fundamentalvision/Deformable-DETR, models/deformable_transformer.py,
  DeformableTransformerDecoder.forward, ``reference_points = new_reference_points.detach()``):
  each decoder stage reads the backbone's features at the current box (``F.grid_sample``) and
  predicts the next box, every stage's box compared with the ground truth; the initial box is
  predicted from the learned query. The bug twin hands the box on uncut (``reference =
  new_reference``): the fix is that line, the ``.detach()`` on an assignment inside the loop
  (no other single cut is as right: one at the top of the loop would also cut the initial
  box). Found at iteration 0.
- a recurrent burn-in (Kapturowski et al., "Recurrent Experience Replay in Distributed
  Reinforcement Learning", R2D2, ICLR 2019, no arXiv version; pytorch/rl,
  torchrl/envs/transforms/transforms.py, BurnInTransform.forward, the burn-in under
  ``torch.no_grad()``): a loop over the burn-in steps whose body is the training unroll's first
  line, then the unroll trained by TD targets. The bug twin guards the burn-in with ``if
  args.burn_in > 0:``: the fix is that line (``with torch.no_grad():`` around the loop);
  detaching the state where the burn-in loop steps it, or after that loop, is as right. Found
  at iteration 0.
- an iterative render-and-compare pose refinement in 2-D (Labbé et al., "CosyPose: Consistent
  multi-view multi-object 6D pose estimation", ECCV 2020, arXiv:2008.08465; ylabbe/cosypose,
  cosypose/models/pose.py, PosePredictor.forward, ``TCO_input = TCO_input.detach()``; after
  DeepIM, Li et al., ECCV 2018, arXiv:1804.00175): the template is rendered and the image
  cropped at the current pose (``F.grid_sample``), every iteration's pose compared with the
  ground truth. The bug twin reads the pose at the top of the loop uncut (``pose_in = pose``):
  the fix is that line, the ``.detach()`` on a read at the top of the loop; detaching the pose
  handed on at the bottom of the loop, or inserting the cut right after the loop's header, is
  as right (the first pose is a given estimate). Found at iteration 0.
- a deep equilibrium sequence model trained by the phantom gradient (Bai, Kolter and Koltun,
  "Deep Equilibrium Models", NeurIPS 2019, arXiv:1909.01377; Geng et al., "On Training
  Implicit Models", NeurIPS 2021, arXiv:2111.05177; Bai et al., "Deep Equilibrium Optical Flow
  Estimation", CVPR 2022, arXiv:2204.08442, locuslab/deq-flow, code.v.2.0/core/deq/
  deq_class.py, DEQBase._solve_fixed_point under ``torch.no_grad()``, and core/deq/grad.py,
  backward_factory's ``phantom_grad``): a solver loop, a function of the script, then damped
  differentiable applications of the same layer. The bug twin's solver returns its iterate
  uncut (``return z``): the fix is that line, a cut inside a helper function; detaching at each
  solver iteration, or where the training loop binds what the solver returns, is as right.
  Found at iteration 0.
- a learning rate and a weight decay learned by truncated backpropagation through an unrolled
  inner run (Wu et al., "Understanding Short-Horizon Bias in Stochastic Meta-Optimization",
  ICLR 2018, arXiv:1803.02021; renmengye/meta-optim-public, look_ahead.py, look_ahead_grads
  and its ``zero_out`` at each look-ahead window; the inner run growing over meta-training as in
  Metz et al., ICML 2019, arXiv:1810.10180): the inner weights the steps before the window
  reach are made a new leaf (``.detach().requires_grad_()``). The bug twin binds them uncut:
  the fix is that line. The inner run is the window alone at first and gains a step every
  second iteration, so the bug first changes a gradient at iteration 2: the audit watches
  every iteration (``--watch 1``).

Must not be flagged: the five published scripts; an inverse compositional spatial transformer
(Lin and Lucey, CVPR 2017, arXiv:1612.03897; chenhsuanlin/inverse-compositional-STN,
MNIST-pytorch/graph.py, ICSTN.forward), whose warp parameters, composed over a loop of
``F.grid_sample`` warps and applied once more after it, are never compared with a target and
are trained end to end through every warp; unsupervised optical flow by coarse-to-fine
photometric warping (Liu et al., "Learning by Analogy", ARFlow, CVPR 2020, arXiv:2003.13045;
lliuz/ARFlow, models/pwclite.py, PWCLite.forward_2_frames), a shared estimator whose flow is
handed from level to level with its graph and scored only by warping images; a neural ODE
classifier integrated by fixed-step RK4 and differentiated through the solver (Chen et al.,
NeurIPS 2018, arXiv:1806.07366; rtqichen/torchdiffeq), a loop followed by a final readout; a
structured prediction energy network trained through its unrolled gradient-descent inference
(Belanger, Yang and McCallum, ICML 2017, arXiv:1703.05667; davidBelanger/SPEN,
optimize/UnrolledGradientOptimizer.lua); and scheduled sampling (Bengio et al., NeurIPS 2015,
arXiv:1506.03099), two loops carrying one recurrent state, the second doing more than the first
(feeding back the model's own tokens), every step of both trained by backpropagation through
time.
"""

from __future__ import annotations

import difflib
import re

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains, or every iteration
#: where the bug first changes a gradient after some iterations
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: Deformable DETR's iterative box refinement: the box handed on to the next stage
BOX_BUGGY = "box_refine_1d_reference_kept.py"
BOX_CLEAN = "box_refine_1d.py"
BOX_LINE = 76
BOX_ALSO: tuple[int, ...] = ()
BOX_BUG = "            reference = new_reference"
BOX_FIX = "            reference = new_reference.detach()"
#: the stepped tensors whose gradients the uncut box changes (all but the last stage's)
BOX_NAMES = ("bbox_embed", "stages", "reference_points", "backbone", "query")

#: R2D2's burn-in: the line that opens the burn-in loop's block, and the loop's body (a
#: ``.detach()`` there, or a cut inserted after it, after the loop, is as right)
R2D2_BUGGY = "r2d2_burn_in_with_graph.py"
R2D2_CLEAN = "r2d2_burn_in.py"
R2D2_LINE = 75
R2D2_ALSO = (77,)
R2D2_BUG = "    if args.burn_in > 0:"
R2D2_FIX = "    with torch.no_grad():"
R2D2_NAMES = ("encoder", "core")

#: CosyPose's refinement: the pose read at the top of the loop; the pose handed on at its
#: bottom, and the loop's header (a cut inserted right after it) are as right
POSE_BUGGY = "cosypose_refiner_2d_pose_kept.py"
POSE_CLEAN = "cosypose_refiner_2d.py"
POSE_LINE = 81
POSE_ALSO = (80, 84)
POSE_BUG = "        pose_in = pose"
POSE_FIX = "        pose_in = pose.detach()"
POSE_NAMES = ("net", "pose_head")

#: the DEQ's solver: its return inside the helper; the solver loop's body and the line of the
#: training loop that binds what the solver returns are as right
DEQ_BUGGY = "deq_phantom_sequence_solver_kept.py"
DEQ_CLEAN = "deq_phantom_sequence.py"
DEQ_LINE = 65
DEQ_ALSO = (64, 73)
DEQ_BUG = "    return z"
DEQ_FIX = "    return z.detach()"
DEQ_NAMES = ("mix", "inject")

#: the learned learning rate's truncated unroll: the line that binds the weights the steps
#: before the window reach
LR_BUGGY = "learned_lr_truncated_uncut.py"
LR_CLEAN = "learned_lr_truncated.py"
LR_LINE = 66
LR_ALSO: tuple[int, ...] = ()
LR_BUG = "    weights = unroll(weights, horizon - args.window, train)"
LR_FIX = "    weights = unroll(weights, horizon - args.window, train).detach().requires_grad_()"
LR_NAMES = ("log_lr", "log_decay")
#: at the script's defaults (``--window 3``) the inner run has a step before the window from
#: iteration 2 on
LR_FIRST_CUT = 2

PAIRS = [
    pytest.param(BOX_BUGGY, BOX_CLEAN, BOX_LINE, BOX_ALSO, BOX_NAMES, STEPS, 0,
                 id="deformable-detr-box-assigned-in-loop"),
    pytest.param(R2D2_BUGGY, R2D2_CLEAN, R2D2_LINE, R2D2_ALSO, R2D2_NAMES, STEPS, 0,
                 id="r2d2-burn-in-no-grad-block"),
    pytest.param(POSE_BUGGY, POSE_CLEAN, POSE_LINE, POSE_ALSO, POSE_NAMES, STEPS, 0,
                 id="cosypose-pose-read-at-loop-top"),
    pytest.param(DEQ_BUGGY, DEQ_CLEAN, DEQ_LINE, DEQ_ALSO, DEQ_NAMES, STEPS, 0,
                 id="deq-phantom-solver-helper"),
    pytest.param(LR_BUGGY, LR_CLEAN, LR_LINE, LR_ALSO, LR_NAMES, WATCH, LR_FIRST_CUT,
                 id="learned-lr-truncated-new-leaf-late"),
]
TWINS = [
    pytest.param(BOX_BUGGY, BOX_CLEAN, BOX_LINE, BOX_BUG, BOX_FIX,
                 id="deformable-detr-box-assigned-in-loop"),
    pytest.param(R2D2_BUGGY, R2D2_CLEAN, R2D2_LINE, R2D2_BUG, R2D2_FIX,
                 id="r2d2-burn-in-no-grad-block"),
    pytest.param(POSE_BUGGY, POSE_CLEAN, POSE_LINE, POSE_BUG, POSE_FIX,
                 id="cosypose-pose-read-at-loop-top"),
    pytest.param(DEQ_BUGGY, DEQ_CLEAN, DEQ_LINE, DEQ_BUG, DEQ_FIX, id="deq-phantom-solver-helper"),
    pytest.param(LR_BUGGY, LR_CLEAN, LR_LINE, LR_BUG, LR_FIX,
                 id="learned-lr-truncated-new-leaf-late"),
]
CLEAN = [
    pytest.param(BOX_CLEAN, STEPS, id="deformable-detr-box-assigned-in-loop"),
    pytest.param(R2D2_CLEAN, STEPS, id="r2d2-burn-in-no-grad-block"),
    pytest.param(POSE_CLEAN, STEPS, id="cosypose-pose-read-at-loop-top"),
    pytest.param(DEQ_CLEAN, STEPS, id="deq-phantom-solver-helper"),
    pytest.param(LR_CLEAN, WATCH, id="learned-lr-truncated-new-leaf-late"),
    pytest.param("icstn_recurrent_warps.py", STEPS, id="icstn-warps-never-compared"),
    pytest.param("arflow_pyramid_photometric.py", STEPS, id="arflow-photometric-pyramid"),
    pytest.param("ode_rk4_classifier.py", STEPS, id="neural-ode-rk4-final-readout"),
    pytest.param("spen_unrolled_inference.py", STEPS, id="spen-unrolled-inference"),
    pytest.param("scheduled_sampling_tokens.py", WATCH, id="scheduled-sampling-two-loops"),
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
    """Whether one of the finding's names holds one of ``wanted`` as a whole word: alone, or as
    a part of a longer name, dotted or indexed (``model.bbox_embed.0.weight``, ``log_lr``)."""
    return any(want in re.split(r"\W+", name) for name in finding["names"] for want in wanted)


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


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_names_the_cut_and_the_tensors(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_is_found_at_the_first_iteration_it_changes(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_a_cut_iteration_or_one_trained_through_on_purpose_is_no_finding(
        tmp_path, script, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    folder = project(tmp_path, buggy, clean)
    done = cli(*options, "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    # the written edit: one cut, at the fix line or at a line where it is exactly as right
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
