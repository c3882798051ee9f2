"""``toolkit audit SCRIPT``, the principle of keys cut from the network that makes the queries,
in cases written blind (from the principle and the published methods, not from the rule that
judges them): in a contrastive or prototype loss, a softmax or cross-entropy over the
similarities or negative distances between a query and SEVERAL keys (InfoNCE, NT-Xent, a
prototypical network's softmax over class prototypes, CLIP's two cross-entropies), the published
methods that make the keys with the same network, in the same step, train through the keys as
well as through the queries. A cut of the keys (``.detach()``, or their pass written inside a
``with torch.no_grad():`` block) leaves the loss pushing and pulling the queries only, and the
network learns from one side. The audit fails naming the line of the cut (the ``.detach()``
line, or the line of the pass written inside the block, or that block's own line) and the
stepped tensors of the network whose keys were cut, and its ``--apply`` edit makes the script
train as the published one. Keys cut on purpose because they come from ANOTHER network or from
ANOTHER step (a momentum key encoder, a queue or a memory bank of earlier features, a frozen
tower, fixed class embeddings computed once) and a code computed without gradient as the TARGET
distribution of a prediction are no finding. The kind and wording of the finding are not pinned
here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the cut:

- SimCLR's NT-Xent (Chen, Kornblith, Norouzi and Hinton, "A Simple Framework for Contrastive
  Learning of Visual Representations", ICML 2020, arXiv:2002.05709; google-research/simclr,
  objective.py, ``add_contrastive_loss``). The bug twin detaches the second view's projections
  where they are made (``z_j = projector(encoder(x_j)).detach()``). The fix is that line.
  Found at iteration 0.
- contrastive predictive coding on time series (van den Oord, Li and Vinyals, "Representation
  Learning with Contrastive Predictive Coding", arXiv:1807.03748;
  jefflai108/Contrastive-Predictive-Coding-PyTorch, src/model/model.py, ``CDCK2.forward``). The
  bug twin detaches the encoded futures, the keys of every prediction (``encode_samples =
  torch.stack([...]).detach()``). The encoder still learns through the context: the cut changes
  its gradient, it does not end it. The fix is that line. Found at iteration 0.
- prototypical networks (Snell, Swersky and Zemel, "Prototypical Networks for Few-shot
  Learning", NeurIPS 2017, arXiv:1703.05175; jakesnell/prototypical-networks,
  protonets/models/few_shot.py, ``Protonet.loss``), support and queries in one pass. The bug
  twin detaches the prototypes (``z_proto = z[...].view(...).mean(1).detach()``). The fix is
  that line. Found at iteration 0.
- prototypical networks with the episode in a helper (the same paper; oscarknagg/few-shot,
  few_shot/proto.py, ``proto_net_episode``), the queries' mean norm logged under
  ``torch.no_grad()`` in the helper. The bug twin writes the support pass inside that block
  (``support = model(x_support)`` indented). The fix is that line, out of the block; an edit of
  the block's own line is as right (the logged norm trains nothing). Found at iteration 0.
- supervised contrastive learning (Khosla et al., "Supervised Contrastive Learning", NeurIPS
  2020, arXiv:2004.11362; HobbitLong/SupContrast, losses.py, ``SupConLoss.forward``). The bug
  twin's loss helper detaches the contrast side of the similarity matrix (``anchor_feature @
  contrast_feature.T.detach()``), the detached row maxima beside it as published (numerical
  stability only). The fix is that line, in the helper. Found at iteration 0.
- CLIP's two towers trained jointly (Radford et al., "Learning Transferable Visual Models From
  Natural Language Supervision", ICML 2021, arXiv:2103.00020; mlfoundations/open_clip,
  src/open_clip/loss.py, ``ClipLoss``). The bug twin detaches the text tower's features
  (``text_features = F.normalize(text_tower(tokens), dim=-1).detach()``): the text tower never
  moves. The fix is that line. Found at iteration 0.
- Meta-Baseline (Chen, Liu, Xu, Darrell and Wang, "Meta-Baseline: Exploring Simple
  Meta-Learning for Few-Shot Learning", ICCV 2021, arXiv:2003.04390;
  yinboc/few-shot-meta-baseline, models/meta_baseline.py, ``MetaBaseline.forward``), a
  classifier stage of four updates, then a meta stage in a second loop. The bug twin detaches
  the prototypes of the meta stage (``x_shot = shots.view(...).mean(1).detach()``): the bug
  begins late. The fix is that line. Found at iteration 4, the meta stage's first update (the
  iterations counted over the whole run, the first stage's four first).

Must not be flagged: the seven published scripts, and keys cut on purpose: MoCo's momentum key
encoder and queue (He et al., arXiv:1911.05722; facebookresearch/moco, moco/builder.py), MoCo
v3's momentum keys (Chen, Xie and He, arXiv:2104.02057; facebookresearch/moco-v3,
moco/builder.py), the memory bank of non-parametric instance discrimination (Wu et al.,
arXiv:1805.01978; zhirongw/lemniscate.pytorch, lib/LinearAverage.py), SwAV's codes computed
under ``torch.no_grad()`` from the same network as target distributions (Caron et al.,
arXiv:2006.09882; facebookresearch/swav, main_swav.py), LiT's locked image tower (Zhai et al.,
arXiv:2111.07991; mlfoundations/open_clip, ``CLIP.lock_image_tower``) and a zero-shot head of
class embeddings computed once from a frozen text tower (Radford et al., arXiv:2103.00020;
Wortsman et al., arXiv:2109.01903, mlfoundations/wise-ft, src/models/zeroshot.py).
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains
STEPS = ("--steps", "2")

#: SimCLR: the second view's projections detached where they are made
SIM_BUGGY = "simclr_ntxent_second_view_detached.py"
SIM_CLEAN = "simclr_ntxent.py"
SIM_LINE = 52
SIM_ALSO: tuple[int, ...] = ()
SIM_BUG = "    z_j = projector(encoder(x_j)).detach()"
SIM_FIX = "    z_j = projector(encoder(x_j))"
SIM_NAMES = ("encoder", "projector")
SIM_FIRST = 0

#: CPC on time series: the encoded futures, the keys of every prediction, detached
CPC_BUGGY = "cpc_timeseries_futures_detached.py"
CPC_CLEAN = "cpc_timeseries.py"
CPC_LINE = 46
CPC_ALSO: tuple[int, ...] = ()
CPC_BUG = ("    encode_samples = torch.stack([z[:, t + k] for k in range(1, args.timestep + 1)])"
           ".detach()")
CPC_FIX = "    encode_samples = torch.stack([z[:, t + k] for k in range(1, args.timestep + 1)])"
CPC_NAMES = ("encoder",)
CPC_FIRST = 0

#: prototypical networks: the prototypes detached
PN_BUGGY = "protonet_support_detached.py"
PN_CLEAN = "protonet.py"
PN_LINE = 47
PN_ALSO: tuple[int, ...] = ()
PN_BUG = ("    z_proto = z[:args.n_way * n_support].view(args.n_way, n_support, z_dim).mean(1)"
          ".detach()")
PN_FIX = "    z_proto = z[:args.n_way * n_support].view(args.n_way, n_support, z_dim).mean(1)"
PN_NAMES = ("encoder",)
PN_FIRST = 0

#: prototypical networks, the episode in a helper: the support pass written inside the
#: helper's ``torch.no_grad()`` block; the block's own line, whose edit is as right
PH_BUGGY = "protonet_episode_helper_support_no_grad.py"
PH_CLEAN = "protonet_episode_helper.py"
PH_LINE = 41
PH_BLOCK = 39
PH_ALSO = (PH_BLOCK,)
PH_BUG = "        support = model(x_support)"
PH_FIX = "    support = model(x_support)"
PH_BLOCK_TEXT = "    with torch.no_grad():"
PH_NAMES = ("model",)
PH_FIRST = 0

#: SupCon: the loss helper detaches the contrast side of the similarity matrix
SC_BUGGY = "supcon_contrast_side_detached.py"
SC_CLEAN = "supcon.py"
SC_LINE = 48
SC_ALSO: tuple[int, ...] = ()
SC_BUG = "    anchor_dot_contrast = anchor_feature @ contrast_feature.T.detach() / temperature"
SC_FIX = "    anchor_dot_contrast = anchor_feature @ contrast_feature.T / temperature"
SC_NAMES = ("encoder", "head")
SC_FIRST = 0

#: CLIP's two towers: the text tower's features detached
CLIP_BUGGY = "clip_two_tower_text_detached.py"
CLIP_CLEAN = "clip_two_tower.py"
CLIP_LINE = 58
CLIP_ALSO: tuple[int, ...] = ()
CLIP_BUG = "    text_features = F.normalize(text_tower(tokens), dim=-1).detach()"
CLIP_FIX = "    text_features = F.normalize(text_tower(tokens), dim=-1)"
CLIP_NAMES = ("text_tower",)
CLIP_FIRST = 0

#: Meta-Baseline: the meta stage's prototypes detached, after a classifier stage
MB_BUGGY = "meta_baseline_shots_detached.py"
MB_CLEAN = "meta_baseline.py"
MB_LINE = 52
MB_ALSO: tuple[int, ...] = ()
MB_BUG = "    x_shot = shots.view(args.n_way, n_shot, -1).mean(1).detach()"
MB_FIX = "    x_shot = shots.view(args.n_way, n_shot, -1).mean(1)"
MB_NAMES = ("encoder",)
#: the classifier stage makes four updates at the script's defaults, and the meta stage is a
#: second loop: the first update the cut changes is iteration 4 of the run
MB_FIRST = 4

PAIRS = [
    pytest.param(SIM_BUGGY, SIM_CLEAN, SIM_LINE, SIM_ALSO, SIM_NAMES, STEPS, SIM_FIRST,
                 id="simclr-second-view-detached"),
    pytest.param(CPC_BUGGY, CPC_CLEAN, CPC_LINE, CPC_ALSO, CPC_NAMES, STEPS, CPC_FIRST,
                 id="cpc-futures-detached"),
    pytest.param(PN_BUGGY, PN_CLEAN, PN_LINE, PN_ALSO, PN_NAMES, STEPS, PN_FIRST,
                 id="protonet-prototypes-detached"),
    pytest.param(PH_BUGGY, PH_CLEAN, PH_LINE, PH_ALSO, PH_NAMES, STEPS, PH_FIRST,
                 id="protonet-helper-support-no-grad"),
    pytest.param(SC_BUGGY, SC_CLEAN, SC_LINE, SC_ALSO, SC_NAMES, STEPS, SC_FIRST,
                 id="supcon-contrast-side-helper"),
    pytest.param(CLIP_BUGGY, CLIP_CLEAN, CLIP_LINE, CLIP_ALSO, CLIP_NAMES, STEPS, CLIP_FIRST,
                 id="clip-text-tower-detached"),
    pytest.param(MB_BUGGY, MB_CLEAN, MB_LINE, MB_ALSO, MB_NAMES, STEPS, MB_FIRST,
                 id="meta-baseline-late"),
]
TWINS = [
    pytest.param(SIM_BUGGY, SIM_CLEAN, SIM_LINE, SIM_BUG, SIM_FIX,
                 id="simclr-second-view-detached"),
    pytest.param(CPC_BUGGY, CPC_CLEAN, CPC_LINE, CPC_BUG, CPC_FIX, id="cpc-futures-detached"),
    pytest.param(PN_BUGGY, PN_CLEAN, PN_LINE, PN_BUG, PN_FIX, id="protonet-prototypes-detached"),
    pytest.param(PH_BUGGY, PH_CLEAN, PH_LINE, PH_BUG, PH_FIX,
                 id="protonet-helper-support-no-grad"),
    pytest.param(SC_BUGGY, SC_CLEAN, SC_LINE, SC_BUG, SC_FIX, id="supcon-contrast-side-helper"),
    pytest.param(CLIP_BUGGY, CLIP_CLEAN, CLIP_LINE, CLIP_BUG, CLIP_FIX,
                 id="clip-text-tower-detached"),
    pytest.param(MB_BUGGY, MB_CLEAN, MB_LINE, MB_BUG, MB_FIX, id="meta-baseline-late"),
]
#: where the cut is a block the pass was written into: the block's line, in both twins
BLOCKS = [
    pytest.param(PH_BUGGY, PH_CLEAN, PH_BLOCK, PH_BLOCK_TEXT,
                 id="protonet-helper-support-no-grad"),
]
CLEAN = [
    pytest.param(SIM_CLEAN, STEPS, id="simclr-both-views"),
    pytest.param(CPC_CLEAN, STEPS, id="cpc-futures-trained"),
    pytest.param(PN_CLEAN, STEPS, id="protonet-prototypes-trained"),
    pytest.param(PH_CLEAN, STEPS, id="protonet-helper-norm-logged-no-grad"),
    pytest.param(SC_CLEAN, STEPS, id="supcon-row-maxima-detached"),
    pytest.param(CLIP_CLEAN, STEPS, id="clip-both-towers"),
    pytest.param(MB_CLEAN, STEPS, id="meta-baseline-prototypes-trained"),
    pytest.param("moco_queue.py", STEPS, id="moco-momentum-keys-and-queue"),
    pytest.param("moco_v3_momentum_keys.py", STEPS, id="moco-v3-momentum-keys"),
    pytest.param("memory_bank_instance_discrimination.py", STEPS, id="memory-bank-keys"),
    pytest.param("swav_codes.py", STEPS, id="swav-codes-as-targets"),
    pytest.param("lit_locked_image_tower.py", STEPS, id="lit-locked-image-tower"),
    pytest.param("zero_shot_head_frozen_text.py", STEPS, id="zero-shot-head-frozen-text"),
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
    (``encoder`` in ``encoder.0.weight``, ``text_tower`` in
    ``text_tower.token_embedding.weight``)."""
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
    # the published script keeps the block for what it rightly cuts (the logged norm of the
    # queries); the bug twin's support pass is the line under it, indented
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
def test_keys_trained_or_cut_from_another_network_or_step_are_no_finding(
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
    # the written edit: one line, the cut or a line whose edit is as right, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
