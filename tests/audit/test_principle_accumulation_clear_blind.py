"""``toolkit audit SCRIPT``, the principle of a clear that drops accumulated gradient, in cases
written blind (from the principle and the published training loops, not from the rule that
judges them): with gradient accumulation, one optimizer step should use the sum of the
gradients of every micro-batch of its window. A clear of the gradient (``optimizer.zero_grad()``,
``model.zero_grad()``, ``p.grad = None``) under a condition that fires BETWEEN the micro-batches
of one window (after a micro-batch's backward pass and before a later backward pass of the same
window, no step in between) drops the earlier micro-batches' gradient: the step trains on part
of the window. In each bug twin one line, the condition of the clear, is wrong so that it fires
inside most windows of the run at the defaults. The audit, run to the end and watching every
iteration (``--watch 1``), fails naming the line of the condition (where the fix belongs; the
line of the clear under it is allowed as well) and the tensors whose gradient was dropped. A
clear that fires only at the windows' boundaries, and a freeze of a part that cancels its
gradient after a window's last backward pass for the first steps of the run only, are no
finding. The kind and wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the condition of the clear:

- nanoGPT (karpathy/nanoGPT, train.py, the loop over ``micro_step``): a character-level GPT, 4
  micro-batches a step, the clear opening each window under ``micro_step == 0``. The bug twin
  tests the LAST micro-step (``micro_step == gradient_accumulation_steps - 1``, nanoGPT's test
  for DDP's gradient sync): the clear runs before the last micro-batch, and every step trains
  on one micro-batch of four. All of the model (``transformer``, ``lm_head``) loses gradient.
- Hugging Face's run_glue_no_trainer.py (huggingface/transformers,
  examples/pytorch/text-classification; the Trainer's ``(step + 1) %
  gradient_accumulation_steps == 0``): a sequence classifier, 4 micro-batches a step, the clear
  opening each window under ``step % gradient_accumulation_steps == 0``. The bug twin copies
  the step's test, ``(step + 1) % ... == 0`` (an off-by-one): the clear runs before the
  window's last micro-batch. ``embeddings``, ``pre_classifier``, ``classifier``.
- pytorch-image-models (huggingface/pytorch-image-models, train.py, ``train_one_epoch`` with
  ``--grad-accum-steps``): a small CNN, windows of 3 (the epoch's last shorter), the clear past
  ``if not need_update: continue``. The bug twin drops the ``not``: the clear runs after each
  micro-batch that does not end its window. ``conv_stem``, ``conv_head``, ``classifier``.
- TRL's PPO (huggingface/trl, trl/trainer/ppo_trainer.py, ``PPOTrainer.train``; Schulman et
  al., arXiv:1707.06347): a contextual bandit, mini-batches of 4 micro-batches, the clear before
  a mini-batch's first micro-batch under ``micro_batch_start % mini_batch_size == 0``. The bug
  twin takes the micro-batch size as the modulus, which always holds: the clear runs before
  every micro-batch. ``policy`` and ``value_model``.

Must not be flagged: the four published scripts, and three more with clears under conditions:
Lightning's ``accumulate_grad_batches`` written in plain torch (Lightning-AI/pytorch-lightning,
loops/optimization/automatic.py: the clear between the forward and the backward pass of a
window's first batch, windows starting again each epoch, the last one shorter), a GAN with both
networks accumulated in the common form ``if (i + 1) % accum == 0:`` step then ``p.grad =
None`` (pytorch/examples, dcgan/main.py), and fastai's fine-tuning with ``GradientAccumulation``
whose pretrained body is frozen for the first 3 of 12 steps by ``p.grad = None`` after each
window's last backward pass and before the step (fastai/fastai, callback/training.py and
callback/schedule.py): a meant freeze that ends early in the run.

Without the audit, the last tests check that each bug is the bug: run to its end from the same
seed, the bug twin saves other weights than the published script; with every optimizer step
watched, the gradient each step uses is the sum of what the backward passes since the step
before added, at every step of each published script, and is not at most steps of its bug
twin; the correct scripts run to their end, and the frozen body trains once its freeze ends.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from script_audit import SCRIPTS, audit, failures, trained

#: the audit's options: run to the end and audit every iteration
WATCH = ("--watch", "1")

#: nanoGPT: the clear opening each window tests the last micro-step, not the first
NG_BUGGY = "nanogpt_micro_step_clear_last_micro.py"
NG_CLEAN = "nanogpt_micro_step_clear.py"
NG_LINE = 125
NG_ALSO = (126,)
NG_BUG = "        if micro_step == args.gradient_accumulation_steps - 1:"
NG_FIX = "        if micro_step == 0:"
NG_ALSO_TEXT = ("            optimizer.zero_grad(set_to_none=True)",)
NG_NAMES = ("transformer", "lm_head")
#: arguments that leave each step's gradient as the backward passes made it (no clipping)
NG_UNCLIPPED = ("--grad-clip", "0")

#: run_glue_no_trainer: the clear copies the step's test, ``(step + 1)`` for ``step``
HF_BUGGY = "glue_no_trainer_accum_clear_off_by_one.py"
HF_CLEAN = "glue_no_trainer_accum_clear.py"
HF_LINE = 79
HF_ALSO = (80,)
HF_BUG = "        if (step + 1) % args.gradient_accumulation_steps == 0:"
HF_FIX = "        if step % args.gradient_accumulation_steps == 0:"
HF_ALSO_TEXT = ("            optimizer.zero_grad()",)
HF_NAMES = ("embeddings", "pre_classifier", "classifier")
HF_UNCLIPPED = ()

#: timm: ``if need_update: continue`` lets the clear run inside the windows
TM_BUGGY = "timm_accum_steps_clear_not_dropped.py"
TM_CLEAN = "timm_accum_steps_clear.py"
TM_LINE = 89
TM_ALSO = (92,)
TM_BUG = "        if need_update:"
TM_FIX = "        if not need_update:"
TM_ALSO_TEXT = ("        optimizer.zero_grad()",)
TM_NAMES = ("conv_stem", "conv_head", "classifier")
#: a bound the gradient's norm never reaches: the clipping multiplies by exactly 1
TM_UNCLIPPED = ("--clip-grad", "1e9")

#: TRL's PPO: the clear's modulus is the micro-batch size, not the mini-batch size
PP_BUGGY = "trl_ppo_micro_batches_wrong_modulus.py"
PP_CLEAN = "trl_ppo_micro_batches.py"
PP_LINE = 72
PP_ALSO = (73,)
PP_BUG = "                if micro_batch_start % args.micro_batch_size == 0:"
PP_FIX = "                if micro_batch_start % args.mini_batch_size == 0:"
PP_ALSO_TEXT = ("                    optimizer.zero_grad()",)
PP_NAMES = ("policy", "value_model")
PP_UNCLIPPED = ()

PAIRS = [
    pytest.param(NG_BUGGY, NG_CLEAN, NG_LINE, NG_ALSO, NG_NAMES, id="nanogpt-last-micro-step"),
    pytest.param(HF_BUGGY, HF_CLEAN, HF_LINE, HF_ALSO, HF_NAMES, id="glue-no-trainer-off-by-one"),
    pytest.param(TM_BUGGY, TM_CLEAN, TM_LINE, TM_ALSO, TM_NAMES, id="timm-not-dropped"),
    pytest.param(PP_BUGGY, PP_CLEAN, PP_LINE, PP_ALSO, PP_NAMES, id="trl-ppo-wrong-modulus"),
]
TWINS = [
    pytest.param(NG_BUGGY, NG_CLEAN, NG_LINE, NG_BUG, NG_FIX, id="nanogpt-last-micro-step"),
    pytest.param(HF_BUGGY, HF_CLEAN, HF_LINE, HF_BUG, HF_FIX, id="glue-no-trainer-off-by-one"),
    pytest.param(TM_BUGGY, TM_CLEAN, TM_LINE, TM_BUG, TM_FIX, id="timm-not-dropped"),
    pytest.param(PP_BUGGY, PP_CLEAN, PP_LINE, PP_BUG, PP_FIX, id="trl-ppo-wrong-modulus"),
]
#: the clears under each condition, the same in both twins
ALSO = [
    pytest.param(NG_BUGGY, NG_CLEAN, NG_ALSO, NG_ALSO_TEXT, id="nanogpt-last-micro-step"),
    pytest.param(HF_BUGGY, HF_CLEAN, HF_ALSO, HF_ALSO_TEXT, id="glue-no-trainer-off-by-one"),
    pytest.param(TM_BUGGY, TM_CLEAN, TM_ALSO, TM_ALSO_TEXT, id="timm-not-dropped"),
    pytest.param(PP_BUGGY, PP_CLEAN, PP_ALSO, PP_ALSO_TEXT, id="trl-ppo-wrong-modulus"),
]
#: each twin with the arguments under which its steps' gradients are left unclipped
SUMS = [
    pytest.param(NG_BUGGY, NG_CLEAN, NG_UNCLIPPED, id="nanogpt-last-micro-step"),
    pytest.param(HF_BUGGY, HF_CLEAN, HF_UNCLIPPED, id="glue-no-trainer-off-by-one"),
    pytest.param(TM_BUGGY, TM_CLEAN, TM_UNCLIPPED, id="timm-not-dropped"),
    pytest.param(PP_BUGGY, PP_CLEAN, PP_UNCLIPPED, id="trl-ppo-wrong-modulus"),
]
#: the correct scripts beyond the published twins
MORE_CLEAN = [
    "lightning_accumulate_grad_batches_partial.py",
    "dcgan_accum_grad_none.py",
    "fastai_accum_fine_tune_freeze.py",
]
CLEAN = [
    pytest.param(NG_CLEAN, WATCH, id="nanogpt-clear-at-first-micro-step"),
    pytest.param(HF_CLEAN, WATCH, id="glue-no-trainer-clear-opens-window"),
    pytest.param(TM_CLEAN, WATCH, id="timm-clear-after-update"),
    pytest.param(PP_CLEAN, WATCH, id="trl-ppo-clear-per-mini-batch"),
    pytest.param(MORE_CLEAN[0], WATCH, id="lightning-accumulate-partial-windows"),
    pytest.param(MORE_CLEAN[1], WATCH, id="dcgan-accumulated-grad-none-after-step"),
    pytest.param(MORE_CLEAN[2], WATCH, id="fastai-accumulated-body-freeze-ends"),
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
    """Whether ``name`` holds one of ``wanted`` as a dotted part (``lm_head`` in
    ``lm_head.weight`` or ``model.lm_head.weight``)."""
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
def test_the_clear_is_under_the_condition_in_both_twins(buggy, clean, also, texts):
    for name in (buggy, clean):
        assert [lines(name)[n - 1] for n in also] == list(texts)


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_audit_the_failure_names_the_condition_and_the_tensors(
        tmp_path, buggy, clean, line, also, names):
    code, report = audit(tmp_path, SCRIPTS / buggy, *WATCH)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_audit_a_clear_at_the_window_boundary_or_a_meant_freeze_is_no_finding(
        tmp_path, script, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.oracle
def test_the_bug_twins_train_other_weights_than_the_published_scripts(tmp_path):
    scripts = [name for pair in TWINS for name in pair.values[:2]]
    for name in scripts:
        shutil.copy(SCRIPTS / name, tmp_path / name)
    saved = dict(zip(scripts, trained(tmp_path, *scripts)))
    for pair in TWINS:
        buggy, clean = pair.values[:2]
        ours, theirs = saved[buggy], saved[clean]
        assert ours.keys() == theirs.keys() and theirs
        assert any(not torch.allclose(ours[key], value) for key, value in theirs.items()), buggy


#: runs a script (``sys.argv[1:]``) to its end with every optimizer step watched: before each
#: step, whether each parameter's gradient is the sum of what the backward passes since the
#: optimizer's step before added to it; prints the list, one entry a step, as JSON
_SUMMED = """\
import json
import runpy
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

optimizers, added, steps = [], {}, []
init = torch.optim.Optimizer.__init__


def tracking_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    optimizers.append(self)


def held():
    return {id(p): p for opt in optimizers for g in opt.param_groups for p in g["params"]}


def grad(p):
    return torch.zeros_like(p) if p.grad is None else p.grad.detach().clone()


backward = torch.autograd.backward


def tracking_backward(*args, **kwargs):
    params = held()
    before = {key: grad(p) for key, p in params.items()}
    backward(*args, **kwargs)
    for key, p in params.items():
        added[key] = added.get(key, 0) + (grad(p) - before[key])


def pre_step(opt, args, kwargs):
    same = True
    for g in opt.param_groups:
        for p in g["params"]:
            summed = added.pop(id(p), torch.zeros_like(p))
            same = same and torch.allclose(grad(p), summed, rtol=1e-4, atol=1e-7)
    steps.append(same)


torch.optim.Optimizer.__init__ = tracking_init
torch.autograd.backward = tracking_backward
register_optimizer_step_pre_hook(pre_step)
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    if stop.code not in (None, 0):
        raise
print("STEPS " + json.dumps(steps))
"""


def summed_steps(script: str, *args: str) -> list[bool]:
    """For each optimizer step of ``script`` run to its end: whether the gradient it used is
    the sum of the window's backward passes."""
    done = subprocess.run([sys.executable, "-c", _SUMMED, str(SCRIPTS / script), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("STEPS ")
    return json.loads(last[len("STEPS "):])


@pytest.mark.oracle
@pytest.mark.parametrize(("buggy", "clean", "args"), SUMS)
def test_each_step_uses_the_sum_of_its_window_only_in_the_published_script(buggy, clean, args):
    theirs = summed_steps(clean, *args)
    ours = summed_steps(buggy, *args)
    assert theirs and all(theirs), theirs
    assert len(ours) >= 4 and sum(not same for same in ours) > len(ours) / 2, ours


@pytest.mark.oracle
def test_the_correct_scripts_run_and_the_frozen_body_trains_once_unfrozen(tmp_path):
    for name in MORE_CLEAN:
        shutil.copy(SCRIPTS / name, tmp_path / name)
    saved = trained(tmp_path, *MORE_CLEAN)
    for name, tensors in zip(MORE_CLEAN, saved):
        assert tensors and all(torch.isfinite(t).all() for t in tensors.values()), name
    freeze = MORE_CLEAN[2]
    init = tmp_path / "init.pt"
    done = subprocess.run([sys.executable, str(SCRIPTS / freeze), "--init-out", str(init)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    before = torch.load(init, weights_only=True)
    after = saved[2]
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert not torch.equal(after[key], value), f"{key} never trained in {freeze}"
