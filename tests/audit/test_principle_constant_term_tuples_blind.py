"""``toolkit audit SCRIPT``, the principle of a loss term made only of cut values, in cases
written blind (from the principle and the published methods, not from the rule that judges
them), where the cut values pass through a call that returns several tensors before the term is
made: a term added to a training loss that is computed only from values cut from the graph (a
network's output, or a value computed from it, ``.detach()``-ed, and data) is a constant: it
changes the printed loss and trains nothing, whether or not the cut values go through
``torch.max(..., dim)``, ``torch.topk``, ``torch.sort``, ``torch.linalg.svd``, ``torch.chunk``
or ``torch.var_mean`` (a tuple or a named tuple, unpacked or iterated) on their way. Where the
published method trains through that term (the hardest negatives of a ranking loss, the mined
values of online hard keypoint mining, a spectral term of the features or of the predictions,
the variance and covariance terms of each view), the cut is the bug. The audit fails naming
the line of the cut (the ``.detach()`` line) and the stepped tensors concerned, and its
``--apply`` edit makes the script train as the published one. Cut values that go through the
same calls and then only select trained values (the indices), only weight or mask a trained
term, only make the target of a trained prediction, or are only printed are no finding. The
kind and wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the cut:

- VSE++ with the hardest negatives (Faghri, Fleet, Kiros and Fidler, "VSE++: Improving
  Visual-Semantic Embeddings with Hard Negatives", BMVC 2018, arXiv:1707.05612;
  fartashf/vsepp, model.py, ``ContrastiveLoss`` with ``max_violation``). The bug twin's helper
  detaches the caption-side costs where they are made (``cost_im = (...).detach()``), before
  their column maxima (``hardest_im, _ = cost_im.max(dim=0)``): that sum is a constant. The fix
  is that line, in the helper. Found at iteration 0.
- online hard keypoint mining of a Cascaded Pyramid Network (Chen et al., CVPR 2018,
  arXiv:1711.07319; chenyilun95/tf-cpn; microsoft/human-pose-estimation.pytorch,
  lib/core/loss.py, ``JointsOHKMMSELoss.ohkm``), the mined term the mean of the values
  ``torch.topk`` returns. The bug twin detaches the RefineNet's per-joint losses before the
  mining: the mined term is a constant and the RefineNet is never trained. The fix is that line.
  Found at iteration 0.
- Batch Spectral Shrinkage (Chen et al., NeurIPS 2019; thuml/Batch-Spectral-Shrinkage;
  thuml/Transfer-Learning-Library, tllib/regularization/bss.py, ``BatchSpectralShrinkage``),
  the squares of the smallest singular values of the feature batch (``torch.linalg.svd``). The
  bug twin calls the term on ``features.detach()``. The fix is that line. Found at iteration 0.
- VICReg with both views in one batch (Bardes, Ponce and LeCun, ICLR 2022, arXiv:2105.04906;
  facebookresearch/vicreg, main_vicreg.py, ``VICReg.forward``), the output split back into the
  views (``torch.chunk``) and the variance and covariance terms computed per view
  (``torch.var_mean``). The bug twin's per-view loop splits the detached output (``for view in
  z.detach().chunk(2):``): both terms are constants. The fix is that line. Found at iteration
  0.
- Batch Nuclear-norm Maximization with a source-only warm-up (Cui et al., CVPR 2020,
  arXiv:2003.12237; cuishuhao/BNM, BNM/train_image.py, ``train``), the negative mean singular
  value of the target predictions (``torch.linalg.svd``), its weight 0 for the first three
  iterations. The bug twin detaches the target logits before the softmax: the term is a
  constant. The audit watches every iteration (``--watch 1``): found at iteration 3.

Must not be flagged: the five published scripts, and cut values that go through the same calls
and enter a loss rightly: the pair mining of the multi-similarity loss, the hardest positive and
negative of each anchor (``torch.min`` and ``torch.max`` along a dimension of the detached
similarities) only masking the trained pairs (Wang et al., arXiv:1904.06627;
msight-tech/research-ms-loss, ``MultiSimilarityLoss``); online hard example mining of the RoIs,
the indices of ``torch.topk`` of per-RoI losses computed under ``torch.no_grad()`` only
selecting the trained losses (Shrivastava, Gupta and Girshick, arXiv:1604.03540;
open-mmlab/mmdetection, ``OHEMSampler.hard_mining``); SimCLR (Chen et al., arXiv:2002.05709)
with the RankMe of each view (Garrido et al., arXiv:2210.02885) from ``torch.linalg.svd`` of
the detached, ``torch.chunk``-ed embeddings, and a weight-0 bonus made from them, only printed;
FixMatch (Sohn et al., arXiv:2001.07685; kekmodel/FixMatch-pytorch, train.py), the
unlabelled logits split by ``chunk`` and the detached weak prediction's ``torch.max`` giving the
strong prediction's target (the indices) and mask (the values); and Co-teaching (Han et al.,
arXiv:1804.06872; bhanML/Co-teaching, ``loss_coteaching``), the indices of ``torch.sort`` of
each network's detached losses only selecting its peer's trained losses.
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains, or every iteration
#: where the term is first weighted after some updates
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: VSE++: the helper detaches the caption-side costs before their column maxima
VSE_BUGGY = "vsepp_max_violation_columns_detached.py"
VSE_CLEAN = "vsepp_max_violation.py"
VSE_LINE = 41
VSE_ALSO: tuple[int, ...] = ()
VSE_BUG = "    cost_im = (margin + scores - diagonal.t()).clamp(min=0).masked_fill(eye, 0).detach()"
VSE_FIX = "    cost_im = (margin + scores - diagonal.t()).clamp(min=0).masked_fill(eye, 0)"
VSE_NAMES = ("img_enc", "txt_enc")
VSE_FIRST = 0

#: CPN's online hard keypoint mining: the per-joint losses detached before ``torch.topk``
OHKM_BUGGY = "cpn_ohkm_joint_losses_detached.py"
OHKM_CLEAN = "cpn_ohkm.py"
OHKM_LINE = 61
OHKM_ALSO: tuple[int, ...] = ()
OHKM_BUG = "    refine_per_joint = 0.5 * (refined - target).pow(2).mean(dim=2).detach()"
OHKM_FIX = "    refine_per_joint = 0.5 * (refined - target).pow(2).mean(dim=2)"
OHKM_NAMES = ("refine_net",)
OHKM_FIRST = 0

#: Batch Spectral Shrinkage: the singular values of the detached features
BSS_BUGGY = "bss_finetune_features_detached.py"
BSS_CLEAN = "bss_finetune.py"
BSS_LINE = 47
BSS_ALSO: tuple[int, ...] = ()
BSS_BUG = "    shrinkage = bss(features.detach(), args.k)"
BSS_FIX = "    shrinkage = bss(features, args.k)"
BSS_NAMES = ("backbone",)
BSS_FIRST = 0

#: VICReg: the per-view loop over the chunks of the detached output
VIC_BUGGY = "vicreg_views_split_regularisers_detached.py"
VIC_CLEAN = "vicreg_views_split.py"
VIC_LINE = 57
VIC_ALSO: tuple[int, ...] = ()
VIC_BUG = "    for view in z.detach().chunk(2):"
VIC_FIX = "    for view in z.chunk(2):"
VIC_NAMES = ("backbone", "projector")
VIC_FIRST = 0

#: BNM after a warm-up: the target predictions detached before the singular values
BNM_BUGGY = "bnm_warmup_target_detached.py"
BNM_CLEAN = "bnm_warmup.py"
BNM_LINE = 43
BNM_ALSO: tuple[int, ...] = ()
BNM_BUG = "    softmax_tgt = F.softmax(model(x_t).detach(), dim=1)"
BNM_FIX = "    softmax_tgt = F.softmax(model(x_t), dim=1)"
BNM_NAMES = ("model",)
#: the term's weight is 0 for the three warm-up iterations at the script's defaults: the first
#: update the cut changes is iteration 3
BNM_FIRST = 3

PAIRS = [
    pytest.param(VSE_BUGGY, VSE_CLEAN, VSE_LINE, VSE_ALSO, VSE_NAMES, STEPS, VSE_FIRST,
                 id="vsepp-max-violation-helper"),
    pytest.param(OHKM_BUGGY, OHKM_CLEAN, OHKM_LINE, OHKM_ALSO, OHKM_NAMES, STEPS, OHKM_FIRST,
                 id="cpn-ohkm-topk-values"),
    pytest.param(BSS_BUGGY, BSS_CLEAN, BSS_LINE, BSS_ALSO, BSS_NAMES, STEPS, BSS_FIRST,
                 id="bss-singular-values"),
    pytest.param(VIC_BUGGY, VIC_CLEAN, VIC_LINE, VIC_ALSO, VIC_NAMES, STEPS, VIC_FIRST,
                 id="vicreg-chunk-var-mean"),
    pytest.param(BNM_BUGGY, BNM_CLEAN, BNM_LINE, BNM_ALSO, BNM_NAMES, WATCH, BNM_FIRST,
                 id="bnm-warmup-late"),
]
TWINS = [
    pytest.param(VSE_BUGGY, VSE_CLEAN, VSE_LINE, VSE_BUG, VSE_FIX,
                 id="vsepp-max-violation-helper"),
    pytest.param(OHKM_BUGGY, OHKM_CLEAN, OHKM_LINE, OHKM_BUG, OHKM_FIX,
                 id="cpn-ohkm-topk-values"),
    pytest.param(BSS_BUGGY, BSS_CLEAN, BSS_LINE, BSS_BUG, BSS_FIX, id="bss-singular-values"),
    pytest.param(VIC_BUGGY, VIC_CLEAN, VIC_LINE, VIC_BUG, VIC_FIX, id="vicreg-chunk-var-mean"),
    pytest.param(BNM_BUGGY, BNM_CLEAN, BNM_LINE, BNM_BUG, BNM_FIX, id="bnm-warmup-late"),
]
CLEAN = [
    pytest.param(VSE_CLEAN, STEPS, id="vsepp-max-violation"),
    pytest.param(OHKM_CLEAN, STEPS, id="cpn-ohkm"),
    pytest.param(BSS_CLEAN, STEPS, id="bss-finetune"),
    pytest.param(VIC_CLEAN, STEPS, id="vicreg-views-split"),
    pytest.param(BNM_CLEAN, WATCH, id="bnm-warmup"),
    pytest.param("ms_loss_mining.py", STEPS, id="ms-loss-min-max-mask"),
    pytest.param("ohem_hard_rois.py", STEPS, id="ohem-topk-indices-select"),
    pytest.param("simclr_rankme_logged.py", STEPS, id="simclr-rankme-svd-printed"),
    pytest.param("fixmatch_pseudo_labels.py", STEPS, id="fixmatch-chunk-max-target-and-mask"),
    pytest.param("coteaching_small_loss.py", STEPS, id="coteaching-sort-indices-select"),
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
