"""``toolkit audit SCRIPT``, the principle of a loss term made only of cut values, in cases
written blind (from the principle and the published methods, not from the rule that judges
them): a term added to a training loss that is computed only from values cut from the graph (a
network's output computed under ``torch.no_grad()`` or ``torch.inference_mode()``, or
``.detach()``-ed, and data) is a constant: it changes the printed loss and trains nothing.
Where the published method trains through that term (a per-view regulariser of a second view, a
cross-entropy of an auxiliary head or of a second pass, an entropy, a KL term, a feature-matching
term), the cut is the bug. The audit fails naming the line of the cut (the ``.detach()`` line,
or the line of the pass written inside a ``with torch.no_grad():`` or ``with
torch.inference_mode():`` block, or that block's own line) and the stepped tensors concerned,
and its ``--apply`` edit makes the script train as the published one. A cut output that is only
the comparison target of a trained prediction, a cut value that only weights, masks or selects
a trained term, and a cut value only logged or printed are no finding. The kind and wording of
the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the cut:

- alignment and uniformity on the hypersphere (Wang and Isola, "Understanding Contrastive
  Representation Learning through Alignment and Uniformity on the Hypersphere", ICML 2020,
  arXiv:2005.10242; SsnL/align_uniform, ``align_loss`` and ``uniform_loss`` and the training
  loop of its README), a uniformity term per view. The bug twin detaches the second view's
  embedding where it is made (``y = F.normalize(encoder(im_y), dim=1).detach()``): the
  alignment still trains ``x`` towards ``y``, but ``uniform_loss(y)`` is a constant. The fix is
  that line. Found at iteration 0.
- virtual adversarial training with entropy minimisation (Miyato, Maeda, Koyama and Ishii,
  "Virtual Adversarial Training", TPAMI 2018, arXiv:1704.03976; takerum/vat_tf,
  train_semisup.py, the ``vatent`` method), the prediction at ``x`` rightly detached as the
  smoothness target. The bug twin computes the entropy term from the detached logits too
  (``ent = entropy(logits_u.detach())``). The fix is that line. Found at iteration 0.
- an auxiliary rotation-prediction head (Hendrycks, Mazeika, Kadavath and Song, "Using
  Self-Supervised Learning Can Improve Model Robustness and Uncertainty", NeurIPS 2019,
  arXiv:1906.12340; hendrycks/ss-ood, adversarial/train.py, ``train``; the rotation task of
  Gidaris, Singh and Komodakis, ICLR 2018, arXiv:1803.07728). The bug twin detaches the
  rotation head's prediction before its own cross-entropy (``rot_logits =
  model.rot_head(pen[len(x):]).detach()``): the rotation head never moves and the trunk learns
  from the labels alone. The fix is that line. Found at iteration 0.
- RegMixup (Pinto, Yang, Lim, Torr and Dokania, "Using Mixup as a Regularizer Can Surprisingly
  Improve Accuracy and Out-of-Distribution Robustness", NeurIPS 2022, arXiv:2206.14502;
  FrancescoPinto/RegMixup, models/regmixup.py, ``training_step``), the clean and the mixed
  batch in two passes, the clean batch's accuracy computed for the log under
  ``torch.inference_mode()`` between them. The bug twin writes the mixed pass inside that block
  (``logits_mix = model(x_mix)`` indented): the mixup cross-entropy is a constant. The fix is
  that line, out of the block; an edit of the block's own line is as right (the accuracy trains
  nothing). Found at iteration 0.
- DINO with multi-crop (Caron et al., "Emerging Properties in Self-Supervised Vision
  Transformers", ICCV 2021, arXiv:2104.14294; facebookresearch/dino, main_dino.py,
  ``train_one_epoch`` and ``DINOLoss``), the teacher's targets computed under
  ``torch.no_grad()``. The bug twin writes the student's pass over the local views inside that
  block (``student_local = [student(v) for v in local_views]`` indented): every term of a local
  view is made of a cut target and a cut prediction. The fix is that line, out of the block; an
  edit of the block's own line is as right (the teacher is not trained). Found at iteration 0.
- the discriminator feature-matching loss of a conditional GAN (Wang et al., "High-Resolution
  Image Synthesis and Semantic Manipulation with Conditional GANs", CVPR 2018,
  arXiv:1711.11585; NVIDIA/pix2pixHD, models/pix2pixHD_model.py, ``loss_G_GAN_Feat``; the
  feature matching of Salimans et al., arXiv:1606.03498), the real features rightly detached.
  The bug twin's helper detaches the fake features too (``F.l1_loss(f.detach(),
  r.detach())``): the generator is trained by its GAN loss alone. The fix is that line, in the
  helper. Found at the generator's update of iteration 0.
- a variational autoencoder with a warm-up of its KL term (Kingma and Welling, arXiv:1312.6114;
  pytorch/examples, vae/main.py, ``loss_function``; the warm-up of Sonderby et al., "Ladder
  Variational Autoencoders", NeurIPS 2016, arXiv:1602.02282, casperkaae/LVAE), the KL weight 0
  in the first epoch. The bug twin calls the loss with ``mu.detach(), logvar.detach()``: the KL
  term is a constant. Its weight is 0 for the four iterations of the first epoch, so the audit
  watches every iteration (``--watch 1``): found at iteration 4.

Must not be flagged: the seven published scripts, and cut outputs that enter a loss rightly:
BYOL's target network (Grill et al., arXiv:2006.07733; lucidrains/byol-pytorch, ``BYOL.forward``),
the mean teacher's consistency target (Tarvainen and Valpola, arXiv:1703.01780;
CuriousAI/mean-teacher, pytorch/main.py), a distilled teacher's soft targets (Hinton, Vinyals
and Dean, arXiv:1503.02531; haitongli/knowledge-distillation-pytorch, ``loss_fn_kd``), a double
DQN's bootstrapped target (van Hasselt, Guez and Silver, arXiv:1509.06461; Kaixhin/Rainbow,
``Agent.learn``), the per-sample weights of Learning from Failure, a generalized cross-entropy
and a relative difficulty from detached losses (Nam et al., arXiv:2007.02561; alinlab/LfF), the
greedy-decoding baseline of self-critical sequence training (Rennie et al., arXiv:1612.00563;
ruotianluo/self-critical.pytorch, ``get_self_critical_reward``), a detached collapse monitor
only logged beside Barlow Twins (Zbontar et al., arXiv:2103.03230; facebookresearch/barlowtwins;
the monitor of Chen and He, arXiv:2011.10566), and the points selected by their reducible loss,
computed without gradient, with a detached number printed beside the loss and never
backpropagated (Mindermann et al., arXiv:2206.07137; OATML/RHO-Loss,
``reducible_loss_selection``).
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains, or every iteration
#: where the term is first weighted after some updates
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: alignment and uniformity: the second view detached where it is made
AU_BUGGY = "align_uniform_second_view_detached.py"
AU_CLEAN = "align_uniform.py"
AU_LINE = 49
AU_ALSO: tuple[int, ...] = ()
AU_BUG = "    y = F.normalize(encoder(im_y), dim=1).detach()"
AU_FIX = "    y = F.normalize(encoder(im_y), dim=1)"
AU_NAMES = ("encoder",)
AU_FIRST = 0

#: VAT+EntMin: the entropy term computed from the detached logits
VAT_BUGGY = "vat_entmin_entropy_detached.py"
VAT_CLEAN = "vat_entmin.py"
VAT_LINE = 64
VAT_ALSO: tuple[int, ...] = ()
VAT_BUG = "    ent = entropy(logits_u.detach())"
VAT_FIX = "    ent = entropy(logits_u)"
VAT_NAMES = ("model",)
VAT_FIRST = 0

#: the auxiliary rotation head: its prediction detached before its own cross-entropy
ROT_BUGGY = "rotation_auxiliary_head_detached.py"
ROT_CLEAN = "rotation_auxiliary_head.py"
ROT_LINE = 52
ROT_ALSO: tuple[int, ...] = ()
ROT_BUG = "    rot_logits = model.rot_head(pen[len(x):]).detach()"
ROT_FIX = "    rot_logits = model.rot_head(pen[len(x):])"
ROT_NAMES = ("rot_head", "trunk")
ROT_FIRST = 0

#: RegMixup: the mixed pass written inside the logging block under ``torch.inference_mode()``;
#: the block's own line, whose edit is as right
RMX_BUGGY = "regmixup_mixed_pass_inference_mode.py"
RMX_CLEAN = "regmixup.py"
RMX_LINE = 45
RMX_BLOCK = 43
RMX_ALSO = (RMX_BLOCK,)
RMX_BUG = "        logits_mix = model(x_mix)"
RMX_FIX = "    logits_mix = model(x_mix)"
RMX_BLOCK_TEXT = "    with torch.inference_mode():"
RMX_NAMES = ("model",)
RMX_FIRST = 0

#: DINO: the student's pass over the local views written inside the teacher's
#: ``torch.no_grad()`` block; the block's own line, whose edit is as right
DINO_BUGGY = "dino_multicrop_local_crops_no_grad.py"
DINO_CLEAN = "dino_multicrop.py"
DINO_LINE = 64
DINO_BLOCK = 61
DINO_ALSO = (DINO_BLOCK,)
DINO_BUG = "        student_local = [student(v) for v in local_views]"
DINO_FIX = "    student_local = [student(v) for v in local_views]"
DINO_BLOCK_TEXT = "    with torch.no_grad():"
DINO_NAMES = ("student",)
DINO_FIRST = 0

#: pix2pixHD's feature matching: the helper detaches the fake features as well as the real
FM_BUGGY = "pix2pixhd_feature_matching_fake_detached.py"
FM_CLEAN = "pix2pixhd_feature_matching.py"
FM_LINE = 49
FM_ALSO: tuple[int, ...] = ()
FM_BUG = ("    return sum(F.l1_loss(f.detach(), r.detach()) "
          "for f, r in zip(fake_features, real_features))")
FM_FIX = "    return sum(F.l1_loss(f, r.detach()) for f, r in zip(fake_features, real_features))"
FM_NAMES = ("G",)
FM_FIRST = 0

#: the VAE with a warm-up: the loss called with the detached mean and log-variance
VAE_BUGGY = "vae_kl_warmup_detached.py"
VAE_CLEAN = "vae_kl_warmup.py"
VAE_LINE = 63
VAE_ALSO: tuple[int, ...] = ()
VAE_BUG = "        loss = loss_function(recon, x, mu.detach(), logvar.detach(), beta)"
VAE_FIX = "        loss = loss_function(recon, x, mu, logvar, beta)"
VAE_NAMES = ("fc1", "fc21", "fc22")
#: the KL weight is 0 in the first epoch (four batches at the script's defaults): the first
#: update the cut changes is the second epoch's first, iteration 4
VAE_FIRST = 4

PAIRS = [
    pytest.param(AU_BUGGY, AU_CLEAN, AU_LINE, AU_ALSO, AU_NAMES, STEPS, AU_FIRST,
                 id="align-uniform-second-view-detached"),
    pytest.param(VAT_BUGGY, VAT_CLEAN, VAT_LINE, VAT_ALSO, VAT_NAMES, STEPS, VAT_FIRST,
                 id="vat-entmin-entropy-detached"),
    pytest.param(ROT_BUGGY, ROT_CLEAN, ROT_LINE, ROT_ALSO, ROT_NAMES, STEPS, ROT_FIRST,
                 id="rotation-head-detached"),
    pytest.param(RMX_BUGGY, RMX_CLEAN, RMX_LINE, RMX_ALSO, RMX_NAMES, STEPS, RMX_FIRST,
                 id="regmixup-mixed-pass-inference-mode"),
    pytest.param(DINO_BUGGY, DINO_CLEAN, DINO_LINE, DINO_ALSO, DINO_NAMES, STEPS, DINO_FIRST,
                 id="dino-local-crops-no-grad"),
    pytest.param(FM_BUGGY, FM_CLEAN, FM_LINE, FM_ALSO, FM_NAMES, STEPS, FM_FIRST,
                 id="pix2pixhd-feature-matching-helper"),
    pytest.param(VAE_BUGGY, VAE_CLEAN, VAE_LINE, VAE_ALSO, VAE_NAMES, WATCH, VAE_FIRST,
                 id="vae-kl-warmup-late"),
]
TWINS = [
    pytest.param(AU_BUGGY, AU_CLEAN, AU_LINE, AU_BUG, AU_FIX,
                 id="align-uniform-second-view-detached"),
    pytest.param(VAT_BUGGY, VAT_CLEAN, VAT_LINE, VAT_BUG, VAT_FIX,
                 id="vat-entmin-entropy-detached"),
    pytest.param(ROT_BUGGY, ROT_CLEAN, ROT_LINE, ROT_BUG, ROT_FIX, id="rotation-head-detached"),
    pytest.param(RMX_BUGGY, RMX_CLEAN, RMX_LINE, RMX_BUG, RMX_FIX,
                 id="regmixup-mixed-pass-inference-mode"),
    pytest.param(DINO_BUGGY, DINO_CLEAN, DINO_LINE, DINO_BUG, DINO_FIX,
                 id="dino-local-crops-no-grad"),
    pytest.param(FM_BUGGY, FM_CLEAN, FM_LINE, FM_BUG, FM_FIX,
                 id="pix2pixhd-feature-matching-helper"),
    pytest.param(VAE_BUGGY, VAE_CLEAN, VAE_LINE, VAE_BUG, VAE_FIX, id="vae-kl-warmup-late"),
]
#: where the cut is a block the pass was written into: the block's line, in both twins
BLOCKS = [
    pytest.param(RMX_BUGGY, RMX_CLEAN, RMX_BLOCK, RMX_BLOCK_TEXT,
                 id="regmixup-mixed-pass-inference-mode"),
    pytest.param(DINO_BUGGY, DINO_CLEAN, DINO_BLOCK, DINO_BLOCK_TEXT,
                 id="dino-local-crops-no-grad"),
]
CLEAN = [
    pytest.param(AU_CLEAN, STEPS, id="align-uniform"),
    pytest.param(VAT_CLEAN, STEPS, id="vat-entmin-target-detached"),
    pytest.param(ROT_CLEAN, STEPS, id="rotation-head"),
    pytest.param(RMX_CLEAN, STEPS, id="regmixup-accuracy-logged-in-inference-mode"),
    pytest.param(DINO_CLEAN, STEPS, id="dino-teacher-targets-no-grad"),
    pytest.param(FM_CLEAN, STEPS, id="pix2pixhd-real-features-target"),
    pytest.param(VAE_CLEAN, WATCH, id="vae-kl-warmup"),
    pytest.param("byol_target_network.py", STEPS, id="byol-target-network"),
    pytest.param("mean_teacher_consistency.py", STEPS, id="mean-teacher-consistency-target"),
    pytest.param("hinton_kd_soft_targets.py", STEPS, id="hinton-kd-teacher-soft-targets"),
    pytest.param("double_dqn_target.py", STEPS, id="double-dqn-bootstrapped-target"),
    pytest.param("lff_relative_difficulty.py", STEPS, id="lff-detached-weights"),
    pytest.param("self_critical_baseline.py", STEPS, id="self-critical-greedy-baseline"),
    pytest.param("barlow_twins_collapse_monitor.py", STEPS, id="barlow-twins-monitor-logged"),
    pytest.param("rho_loss_selection.py", STEPS, id="rho-loss-selection-and-printed-total"),
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
    (``encoder`` in ``encoder.0.weight``, ``rot_head`` in ``model.rot_head.weight``)."""
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


@pytest.mark.parametrize(("buggy", "clean", "block", "text"), BLOCKS)
def test_the_block_the_pass_is_written_in_is_in_both_twins(buggy, clean, block, text):
    # the published script keeps the block for what it rightly cuts (the logged accuracy, the
    # teacher's targets); the bug twin's pass is the line under it, indented
    for name in (buggy, clean):
        assert lines(name)[block - 1] == text


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
def test_the_failure_is_found_at_the_first_iteration(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_a_cut_output_used_as_a_target_weight_or_log_is_no_finding(tmp_path, script, options):
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
    # the written edit: one line, the cut or a line whose edit is as right, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
