"""``toolkit audit SCRIPT``, the principle of a freeze meant to end that never ends, in cases
written blind (from the principle and the published methods, not from the rule that judges
them): published methods often keep a part of the model from training for a first stretch of
the run and then let it train (SwAV's prototypes for the first iterations, a generator waiting
while its discriminator warms up, an actor waiting while its critic is initialised, a
pretrained body frozen for the first epoch of fine-tuning, ULMFiT's gradual unfreezing). The
script writes the freeze under a condition on the run's progress, an ``if`` on an iteration,
step or epoch counter against a threshold. In each bug twin one line, that condition, is wrong
so that it holds at EVERY iteration of the run: the part never trains, although the optimizer
holds it and the loss gives it gradient. The audit, run to the end and watching every iteration
(``--watch 1``: the freeze can only be judged over the whole run), fails naming the line of the
condition (where the fix belongs; the line under it that does the freezing is allowed as well)
and the tensors of the part that never trains. A freeze that ends partway through the run, and
a part frozen for the whole run on purpose and unconditionally (a linear probe, fixed word
vectors left out of the optimizer, an EMA teacher), are no finding. The kind and wording of the
finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the condition; the freezing mechanism of each pair is named:

- SwAV (Caron et al., arXiv:2006.09882; facebookresearch/swav, main_swav.py, ``train``): the
  prototypes' gradients cancelled with ``p.grad = None`` after the backward pass while the
  run's iteration counter is below ``--freeze-prototypes-niters`` (3 of 12 iterations). The bug
  twin compares the EPOCH with that threshold counted in iterations (``epoch < 3`` over 3
  epochs). The prototypes never train.
- SRGAN with a discriminator warm-up (Ledig et al., arXiv:1609.04802; Wang et al.,
  arXiv:1809.00219; XPixelGroup/BasicSR, basicsr/models/srgan_model.py,
  ``SRGANModel.optimize_parameters``): the generator's gradients cancelled with ``p.grad =
  None`` under the negation of BasicSR's test ``current_iter % net_d_iters == 0 and
  current_iter > net_d_init_iters`` (3 of 12 iterations). The bug twin keeps ``== 0`` in the
  negation: with ``net_d_iters`` 1 the condition always holds. ``net_g`` never trains.
- an actor-critic with a critic warm-up (Hu et al., arXiv:2405.11143; OpenRLHF/OpenRLHF,
  openrlhf/trainer/ppo_trainer.py, ``--freezing_actor_steps``): the actor's gradients cleared
  with ``actor.zero_grad()`` (to ``None``) after the backward pass while the global step is
  below the threshold (4 of 12 steps). The bug twin compares the index of the batch within the
  episode, which starts again each episode and stays below 4. The actor never trains.
- fastai's ``fine_tune`` (Howard and Gugger, arXiv:2002.04803; fastai/fastai,
  fastai/callback/schedule.py, ``Learner.fine_tune``): the body's gradients cancelled with
  ``p.grad = None`` after the backward pass for ``--freeze-epochs`` epochs' worth of batches
  (4 of 12 iterations). The bug twin counts the threshold in samples (64), not batches. The
  ``backbone`` never trains.
- ULMFiT's gradual unfreezing (Howard and Ruder, arXiv:1801.06146; fastai/fastai,
  ``Learner.freeze_to``): before each batch, the layer groups below a cut frozen with
  ``requires_grad_(False)`` and the others unfrozen with ``requires_grad_(True)``, the cut
  falling by one group each epoch, reckoned from the run's iteration counter. The bug twin
  reckons it from the batch index within the epoch: the cut never falls, and the ``embedding``
  and the ``rnn`` never train.

Must not be flagged: the five published scripts, whose freeze ends well before the run does at
their defaults, and four more: a MoCo linear probe whose backbone is frozen for the whole run
with ``requires_grad_(False)`` and left out of the optimizer (He et al., arXiv:1911.05722;
facebookresearch/moco, main_lincls.py), Kim's CNN-static whose word vectors are kept fixed by
leaving them out of the optimizer (arXiv:1408.5882; yoonkim/CNN_sentence,
conv_net_sentence.py), data2vec's EMA teacher updated by hand (Baevski et al.,
arXiv:2202.03555; facebookresearch/fairseq, examples/data2vec), and DINO's last layer frozen
for the first epoch only by ``cancel_gradients_last_layer`` in a helper, beside its EMA teacher
(Caron et al., arXiv:2104.14294; facebookresearch/dino, utils.py).

Without the audit, the last tests check that each bug is the bug: run to its end, the bug
twin saves the frozen part's tensors exactly as they were before training, and the published
script saves them changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from script_audit import SCRIPTS, audit, failures

#: the audit's options: run to the end and audit every iteration
WATCH = ("--watch", "1")

#: SwAV: the prototypes' freeze compares the epoch with a threshold counted in iterations
SW_BUGGY = "swav_freeze_prototypes_epoch_counter.py"
SW_CLEAN = "swav_freeze_prototypes.py"
SW_LINE = 89
SW_ALSO = (92,)
SW_BUG = "        if epoch < args.freeze_prototypes_niters:"
SW_FIX = "        if iteration < args.freeze_prototypes_niters:"
SW_ALSO_TEXT = ("                    p.grad = None",)
SW_NAMES = ("prototypes",)

#: SRGAN: the negation of BasicSR's test keeps ``== 0``, which always holds with net_d_iters 1
SR_BUGGY = "srgan_discriminator_warmup_negation_kept.py"
SR_CLEAN = "srgan_discriminator_warmup.py"
SR_LINE = 75
SR_ALSO = (77,)
SR_BUG = "    if current_iter % args.net_d_iters == 0 or current_iter <= args.net_d_init_iters:"
SR_FIX = "    if current_iter % args.net_d_iters != 0 or current_iter <= args.net_d_init_iters:"
SR_ALSO_TEXT = ("            p.grad = None",)
SR_NAMES = ("net_g",)

#: the critic warm-up: the actor's freeze compares the batch index within the episode
RL_BUGGY = "rlhf_critic_warmup_batch_index.py"
RL_CLEAN = "rlhf_critic_warmup.py"
RL_LINE = 70
RL_ALSO = (71,)
RL_BUG = "        if step < args.freezing_actor_steps:"
RL_FIX = "        if global_step < args.freezing_actor_steps:"
RL_ALSO_TEXT = ("            actor.zero_grad()",)
RL_NAMES = ("actor",)

#: fastai's fine_tune: the body's freeze counted in samples, not batches
FT_BUGGY = "fastai_fine_tune_freeze_in_samples.py"
FT_CLEAN = "fastai_fine_tune_freeze_epochs.py"
FT_LINE = 66
FT_ALSO = (68,)
FT_BUG = "        if iteration < args.freeze_epochs * len(train_x):"
FT_FIX = "        if iteration < args.freeze_epochs * batches_per_epoch:"
FT_ALSO_TEXT = ("                p.grad = None",)
FT_NAMES = ("backbone",)

#: ULMFiT: the cut reckoned from the batch index within the epoch never falls
UL_BUGGY = "ulmfit_gradual_unfreezing_batch_index.py"
UL_CLEAN = "ulmfit_gradual_unfreezing.py"
UL_LINE = 65
UL_ALSO = (66,)
UL_BUG = "            if depth < len(groups) - 1 - it // iters_per_epoch:"
UL_FIX = "            if depth < len(groups) - 1 - iteration // iters_per_epoch:"
UL_ALSO_TEXT = ("                group.requires_grad_(False)",)
UL_NAMES = ("embedding", "rnn")

PAIRS = [
    pytest.param(SW_BUGGY, SW_CLEAN, SW_LINE, SW_ALSO, SW_NAMES, id="swav-prototypes-epoch"),
    pytest.param(SR_BUGGY, SR_CLEAN, SR_LINE, SR_ALSO, SR_NAMES, id="srgan-negation-kept"),
    pytest.param(RL_BUGGY, RL_CLEAN, RL_LINE, RL_ALSO, RL_NAMES, id="critic-warmup-batch-index"),
    pytest.param(FT_BUGGY, FT_CLEAN, FT_LINE, FT_ALSO, FT_NAMES, id="fine-tune-in-samples"),
    pytest.param(UL_BUGGY, UL_CLEAN, UL_LINE, UL_ALSO, UL_NAMES, id="ulmfit-batch-index"),
]
TWINS = [
    pytest.param(SW_BUGGY, SW_CLEAN, SW_LINE, SW_BUG, SW_FIX, id="swav-prototypes-epoch"),
    pytest.param(SR_BUGGY, SR_CLEAN, SR_LINE, SR_BUG, SR_FIX, id="srgan-negation-kept"),
    pytest.param(RL_BUGGY, RL_CLEAN, RL_LINE, RL_BUG, RL_FIX, id="critic-warmup-batch-index"),
    pytest.param(FT_BUGGY, FT_CLEAN, FT_LINE, FT_BUG, FT_FIX, id="fine-tune-in-samples"),
    pytest.param(UL_BUGGY, UL_CLEAN, UL_LINE, UL_BUG, UL_FIX, id="ulmfit-batch-index"),
]
#: the lines under each condition that do the freezing, the same in both twins
ALSO = [
    pytest.param(SW_BUGGY, SW_CLEAN, SW_ALSO, SW_ALSO_TEXT, id="swav-prototypes-epoch"),
    pytest.param(SR_BUGGY, SR_CLEAN, SR_ALSO, SR_ALSO_TEXT, id="srgan-negation-kept"),
    pytest.param(RL_BUGGY, RL_CLEAN, RL_ALSO, RL_ALSO_TEXT, id="critic-warmup-batch-index"),
    pytest.param(FT_BUGGY, FT_CLEAN, FT_ALSO, FT_ALSO_TEXT, id="fine-tune-in-samples"),
    pytest.param(UL_BUGGY, UL_CLEAN, UL_ALSO, UL_ALSO_TEXT, id="ulmfit-batch-index"),
]
CLEAN = [
    pytest.param(SW_CLEAN, WATCH, id="swav-prototypes-freeze-ends"),
    pytest.param(SR_CLEAN, WATCH, id="srgan-generator-waits-then-trains"),
    pytest.param(RL_CLEAN, WATCH, id="critic-warmup-ends"),
    pytest.param(FT_CLEAN, WATCH, id="fine-tune-body-unfrozen"),
    pytest.param(UL_CLEAN, WATCH, id="ulmfit-gradual-unfreezing"),
    pytest.param("linear_probe_frozen_backbone.py", WATCH, id="linear-probe-frozen-backbone"),
    pytest.param("kim_cnn_static_embedding.py", WATCH, id="cnn-static-word-vectors"),
    pytest.param("data2vec_ema_teacher.py", WATCH, id="data2vec-ema-teacher"),
    pytest.param("dino_freeze_last_layer.py", WATCH, id="dino-last-layer-freeze-ends"),
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


def in_part(name: str, wanted: tuple[str, ...]) -> bool:
    """Whether ``name`` holds one of ``wanted`` as a dotted part (``prototypes`` in
    ``prototypes.weight`` or ``model.prototypes.weight``, ``net_g`` in ``net_g.0.weight``)."""
    return any(f".{want}." in f".{name}." for want in wanted)


def names_the_tensor(finding: dict, wanted: tuple[str, ...]) -> bool:
    """Whether one of the finding's names holds one of ``wanted`` as a dotted part."""
    return any(in_part(name, wanted) for name in finding["names"])


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_twins_differ_only_by_the_condition(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


@pytest.mark.parametrize(("buggy", "clean", "also", "texts"), ALSO)
def test_the_freezing_line_is_under_the_condition_in_both_twins(buggy, clean, also, texts):
    for name in (buggy, clean):
        assert [lines(name)[n - 1] for n in also] == list(texts)


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_the_failure_names_the_condition_and_the_tensors(
        tmp_path, buggy, clean, line, also, names):
    code, report = audit(tmp_path, SCRIPTS / buggy, *WATCH)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_a_freeze_that_ends_or_is_meant_for_the_whole_run_is_no_finding(
        tmp_path, script, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


def run_to_end(tmp_path: Path, script: str) -> tuple[dict, dict]:
    """``python SCRIPT --init-out I --out O`` run to its end: the tensors it saved before
    training and after."""
    init, out = tmp_path / f"{script}.init.pt", tmp_path / f"{script}.pt"
    done = subprocess.run([sys.executable, str(SCRIPTS / script), "--init-out", str(init),
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return (torch.load(init, weights_only=True), torch.load(out, weights_only=True))


@pytest.mark.oracle
@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_the_bug_twin_never_trains_the_part_and_the_published_script_does(
        tmp_path, buggy, clean, line, also, names):
    bug_init, bug_out = run_to_end(tmp_path, buggy)
    pub_init, pub_out = run_to_end(tmp_path, clean)
    assert bug_init.keys() == pub_init.keys() == bug_out.keys() == pub_out.keys()
    # the same seed, the same start
    for key, value in pub_init.items():
        assert torch.equal(bug_init[key], value), key
    part = [key for key in pub_init if in_part(key, names)]
    rest = [key for key in pub_init if key not in part]
    assert part and rest
    for key in part:
        assert torch.equal(bug_out[key], bug_init[key]), f"{key} trained in {buggy}"
        assert not torch.equal(pub_out[key], pub_init[key]), f"{key} never trained in {clean}"
    # the rest of the model trains in the bug twin's run all the same
    assert any(not torch.equal(bug_out[key], bug_init[key]) for key in rest)
