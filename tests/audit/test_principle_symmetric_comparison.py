"""``toolkit audit SCRIPT``, the principle of a comparison whose two sides are both trained on
purpose, against one whose target, made by the same network, must still be cut. A comparison
in a loss is a trained target when one side is meant as a constant (a target) but carries
gradient to tensors an optimizer steps. Some methods, though, compare two outputs that are both
meant to train: the same network applied to two inputs (two augmented views, two stochastic
passes with dropout and noise), the comparison symmetric, each output pulled toward the other.
Those sides are mirror images (the same modules, at the same depth, on the same kind of input,
with nothing computed on one side that the other lacks) and the published code cuts neither:
no finding. Where the same network makes the target but the two sides are NOT mirror images
(one side is a prediction through a module the other skips, or the target comes from another
input pipeline and through arithmetic: an average, a sharpening, a mask, a reward plus a
discounted maximum), the target is still a target, the published code cuts it, and the script
that does not is a failure. The fix is the ``.detach()`` on the line where the target is made;
each case also lists the lines where a single cut is as right (the same gradient: the target
read only as a target). The kind and wording of the finding are not pinned here.

Must not be flagged (``tests/lens/audit/scripts/``):

- VICReg (Bardes, Ponce and LeCun, "VICReg: Variance-Invariance-Covariance Regularization for
  Self-Supervised Learning", ICLR 2022, arXiv:2105.04906; facebookresearch/vicreg): a backbone
  and a projector with BatchNorm embed two augmented views; the invariance term
  ``F.mse_loss(z_a, z_b)`` plus the variance and covariance terms of each branch, no
  stop-gradient anywhere. Single phase.
- the Pi-model (Laine and Aila, "Temporal Ensembling for Semi-Supervised Learning", ICLR 2017,
  arXiv:1610.02242; smlaine2/tempens): one classifier with dropout run twice on each minibatch
  under Gaussian input noise; the cross-entropy of the labelled rows plus a Gaussian-ramped
  weight times the squared difference of the two passes' softmax outputs, both with gradient.
  The weight grows every iteration, so it is also audited at every iteration.
- W-MSE (Ermolov, Siarohin, Sangineto and Sebe, "Whitening for Self-Supervised Representation
  Learning", ICML 2021, arXiv:2007.06346; htdt/self-supervised) then a linear probe (the linear
  evaluation of Chen et al., SimCLR, ICML 2020, arXiv:2002.05709): two phases; each view's
  embeddings whitened by a differentiable Cholesky whitening, the normalized MSE between the
  two whitened views, both trained; then a linear classifier on the backbone's features read
  under ``torch.no_grad()``, with its own optimizer.
- the published twin of each bug below.

Bug twins, each a published script and its twin differing in one line of code, the cut:

- SimSiam written with a normalized MSE (Chen and He, "Exploring Simple Siamese
  Representation Learning", CVPR 2021, arXiv:2011.10566; facebookresearch/simsiam; the
  normalized MSE of Grill et al., BYOL, NeurIPS 2020, arXiv:2006.07733): the prediction
  ``normalize(predictor(z1))`` against ``normalize(z2)`` and the other way round; the two sides
  are the same encoder on two views, but one goes on through the predictor. The bug twin
  normalizes ``z1`` and ``z2`` as targets without ``.detach()``: the fix is that line (also:
  the loss line, which reads both targets). The target trains the encoder (not the predictor).
  Single phase: found at iteration 0.
- MixMatch (Berthelot et al., "MixMatch: A Holistic Approach to Semi-Supervised Learning",
  NeurIPS 2019, arXiv:1905.02249; google-research/mixmatch; YU1ut/MixMatch-pytorch): the
  guessed label, the sharpened average of the classifier's softmax on two augmentations of
  each unlabelled sample, mixed by MixUp with the labelled rows, the target of the L2 loss on
  the mixed unlabelled rows (and of the cross-entropy on the mixed labelled ones). The bug twin
  leaves out the ``.detach()`` of the guess: the fix is that line (also: the line that averages
  the two softmaxes, the one that stacks the targets, and the one that mixes them). The
  unlabelled term is switched on after ten supervised steps, inside the same loop, so the
  audit watches every iteration (``--watch 1``): found at iteration 10.
- UDA with a confidence mask (Xie et al., "Unsupervised Data Augmentation for Consistency
  Training", NeurIPS 2020, arXiv:1904.12848; google-research/uda): after a supervised warm-up
  loop (six iterations), a second loop adds the KL divergence from the classifier's sharpened
  prediction on each unlabelled sample as it is (under dropout, like the other side) to its
  prediction on a strongly augmented copy, on the confident rows alone. The bug twin leaves out
  the ``.detach()`` of the sharpened target: the fix is that line (also: the line that makes
  the original's logits, read otherwise only by the mask's comparison, and the KL's line). Two
  loops, ``--steps 2``: found at the second loop's first iteration, 6.
- DQN with the online network as its own bootstrap (Mnih et al., "Playing Atari with Deep
  Reinforcement Learning", arXiv:1312.5602, Algorithm 1; the step of vwxyzjn/cleanrl's
  cleanrl/dqn.py): the TD target ``r + gamma * max_a' Q(s', a')`` and the prediction
  ``Q(s, a)`` made by one network on the next state and the state. The bug twin reads the
  bootstrap without ``.detach()``: the fix is that line (also: the loss line,
  ``td_target.detach()``). Training starts once the buffer holds sixteen transitions; the
  audit counts iterations by updates: found at iteration 0.
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains (the two loops each
#: get theirs), or every iteration where the bug begins later inside the one loop
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: SimSiam with a normalized MSE: the line that normalizes the targets, and the loss that
#: reads them
SIMSIAM_BUGGY = "simsiam_nmse_target_trained.py"
SIMSIAM_CLEAN = "simsiam_nmse.py"
SIMSIAM_LINE = 54
SIMSIAM_BUG = "    t1, t2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)"
SIMSIAM_FIX = "    t1, t2 = F.normalize(z1.detach(), dim=1), F.normalize(z2.detach(), dim=1)"
SIMSIAM_LOSS = 55
SIMSIAM_ALSO = (SIMSIAM_LOSS,)
#: the encoder's tensors (backbone, projection and its BatchNorm), which the targets train; the
#: predictor is on the prediction's side alone
SIMSIAM_NAMES = ("encoder.0.weight", "encoder.0.bias", "encoder.2.weight", "encoder.2.bias",
                 "encoder.3.weight", "encoder.3.bias")

#: MixMatch: the guessed label; the average of the two softmaxes, the targets stacked, mixed
MIXMATCH_BUGGY = "mixmatch_guess_trained.py"
MIXMATCH_CLEAN = "mixmatch_guess.py"
MIXMATCH_LINE = 72
MIXMATCH_BUG = "        guess = sharpen(p_u, args.T)"
MIXMATCH_FIX = "        guess = sharpen(p_u, args.T).detach()"
MIXMATCH_ALSO = (71, 73, 78)
MIXMATCH_NAMES = ("model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias",
                  "model.4.weight", "model.4.bias")
#: the first iteration with the unlabelled term, at the script's defaults (``--warmup 10``)
MIXMATCH_FIRST = 10

#: UDA: the sharpened target; the original's logits, the KL divergence that reads the target
UDA_BUGGY = "uda_confidence_masked_trained.py"
UDA_CLEAN = "uda_confidence_masked.py"
UDA_LINE = 63
UDA_BUG = "    targets = F.softmax(ori_logits / args.T, dim=1)"
UDA_FIX = "    targets = F.softmax(ori_logits / args.T, dim=1).detach()"
UDA_ALSO = (61, 65)
UDA_NAMES = ("model.0.weight", "model.0.bias", "model.3.weight", "model.3.bias")
#: the warm-up loop's iterations at the script's defaults: the second loop's first (0-based)
UDA_WARMUP = 6

#: DQN: the TD target made from the online network, and the loss that reads it
DQN_BUGGY = "dqn_online_target_trained.py"
DQN_CLEAN = "dqn_online_target.py"
DQN_LINE = 74
DQN_BUG = ("        td_target = b_rew + args.gamma * q_network(b_next).max(dim=1).values"
           " * (1 - b_done)")
DQN_FIX = ("        td_target = b_rew + args.gamma * q_network(b_next).detach().max(dim=1).values"
           " * (1 - b_done)")
DQN_ALSO = (76,)
DQN_NAMES = ("q_network.0.weight", "q_network.0.bias", "q_network.2.weight",
             "q_network.2.bias")

PAIRS = [
    pytest.param(SIMSIAM_BUGGY, SIMSIAM_CLEAN, SIMSIAM_LINE, SIMSIAM_ALSO, SIMSIAM_NAMES, STEPS,
                 0, id="simsiam-normalized-mse"),
    pytest.param(MIXMATCH_BUGGY, MIXMATCH_CLEAN, MIXMATCH_LINE, MIXMATCH_ALSO, MIXMATCH_NAMES,
                 WATCH, MIXMATCH_FIRST, id="mixmatch-guess-after-warm-up"),
    pytest.param(UDA_BUGGY, UDA_CLEAN, UDA_LINE, UDA_ALSO, UDA_NAMES, STEPS, UDA_WARMUP,
                 id="uda-masked-target-second-loop"),
    pytest.param(DQN_BUGGY, DQN_CLEAN, DQN_LINE, DQN_ALSO, DQN_NAMES, STEPS, 0,
                 id="dqn-online-bootstrap"),
]
TWINS = [
    pytest.param(SIMSIAM_BUGGY, SIMSIAM_CLEAN, SIMSIAM_LINE, SIMSIAM_BUG, SIMSIAM_FIX,
                 id="simsiam-normalized-mse"),
    pytest.param(MIXMATCH_BUGGY, MIXMATCH_CLEAN, MIXMATCH_LINE, MIXMATCH_BUG, MIXMATCH_FIX,
                 id="mixmatch-guess-after-warm-up"),
    pytest.param(UDA_BUGGY, UDA_CLEAN, UDA_LINE, UDA_BUG, UDA_FIX,
                 id="uda-masked-target-second-loop"),
    pytest.param(DQN_BUGGY, DQN_CLEAN, DQN_LINE, DQN_BUG, DQN_FIX, id="dqn-online-bootstrap"),
]
#: the comparisons of two sides both trained on purpose, by the audit's default options and at
#: every iteration
SYMMETRIC = [
    pytest.param("vicreg_invariance.py", STEPS, id="vicreg-steps"),
    pytest.param("vicreg_invariance.py", WATCH, id="vicreg-watch"),
    pytest.param("pi_model_consistency.py", STEPS, id="pi-model-steps"),
    pytest.param("pi_model_consistency.py", WATCH, id="pi-model-watch"),
    pytest.param("wmse_then_probe.py", STEPS, id="wmse-then-probe-steps"),
    pytest.param("wmse_then_probe.py", WATCH, id="wmse-then-probe-watch"),
]
CLEAN = [
    *SYMMETRIC,
    pytest.param(SIMSIAM_CLEAN, STEPS, id="simsiam-normalized-mse-published"),
    pytest.param(MIXMATCH_CLEAN, WATCH, id="mixmatch-guess-published"),
    pytest.param(UDA_CLEAN, STEPS, id="uda-masked-target-published"),
    pytest.param(DQN_CLEAN, STEPS, id="dqn-online-bootstrap-published"),
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
    """Whether one of the finding's names is one of ``wanted``, alone or as the dotted tail or
    part of a longer name (``net.encoder.0.weight``)."""
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
def test_the_twins_differ_only_by_the_cut_of_the_target(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_names_the_target_and_the_tensors_it_trains(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_is_found_at_the_first_update_the_target_trains(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_two_sides_both_trained_on_purpose_or_a_target_already_cut_are_no_finding(
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
    # the written edit: one line, the fix line or one of the lines where a single cut is as
    # right, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
