"""``toolkit audit SCRIPT``, the principle of a lost gradient: gradient that a ``backward()``
wrote into tensors an optimizer holds, and that a clear (``optimizer.zero_grad()``,
``model.zero_grad()``, ``p.grad = None``) removes before any optimizer step or the script's own
code has read it, is lost. It is a failure (``cleared``) at the clear's line, naming the
tensors, whose edit moves the clear to after the step it precedes (every ``backward()`` between
two steps is then summed), verified by rerunning the script.

The cases (``tests/lens/audit/scripts/``), in fields other than the held-out ones:

- bugs: a LeNet-like classifier with gradient accumulation after HuggingFace's
  ``run_clm_no_trainer.py`` loop, ``optimizer.zero_grad()`` moved before each micro-batch's
  ``backward()``; a GRU encoder-decoder with two optimizers after the PyTorch seq2seq tutorial,
  its ``for p in parameters: p.grad = None`` moved into the micro-batch loop;
- must not be flagged: the published twins (the clear after the step), a clear once per update
  at its first micro-batch, DP-SGD's per-example gradients (each read from ``.grad`` before it
  is cleared), a GAN whose generator loss writes the discriminator's ``.grad`` that the
  discriminator's ``zero_grad()`` clears after the generator's optimizer stepped, an
  actor-critic that calls ``backward()`` twice and clears after the step, and a DDPG update
  whose actor is cut off (its loss writes only the critic's ``.grad``, cleared after the
  actor's step): the critic's part is wasted work, not a lost gradient;
- a clear that is the only statement of an ``if`` on the loop's counter firing between the
  micro-batches of a window: the edit removes the ``if`` with it.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

CNN = ["model.conv1.bias", "model.conv1.weight", "model.conv2.bias", "model.conv2.weight",
       "model.fc.bias", "model.fc.weight"]
SEQ2SEQ = sorted(f"{net}.{name}" for net, names in (
    ("encoder", ["embedding.weight", "gru.weight_ih_l0", "gru.weight_hh_l0", "gru.bias_ih_l0",
                 "gru.bias_hh_l0"]),
    ("decoder", ["embedding.weight", "gru.weight_ih_l0", "gru.weight_hh_l0", "gru.bias_ih_l0",
                 "gru.bias_hh_l0", "out.weight", "out.bias"])) for name in names)


def test_zero_grad_before_each_micro_batch_loses_the_accumulated_gradient(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "cnn_accum_zero_grad_per_micro_batch.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "cleared"
    assert found["at"][0].startswith(
        "cnn_accum_zero_grad_per_micro_batch.py:67: optimizer.zero_grad()")
    assert sorted(found["names"]) == CNN
    # moved after the step it precedes and the scheduler's step after it, in their block
    (removed, inserted) = sorted(found["edits"], key=lambda e: e["new"])
    assert removed["new"] == "" and removed["start"][0] == 67
    assert inserted["new"] == "            optimizer.zero_grad()\n"
    assert inserted["start"][0] == 72


def test_grad_set_to_none_before_each_micro_batch_loses_the_accumulated_gradient(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "seq2seq_accum_grad_none_per_micro_batch.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "cleared"
    assert found["at"][0].startswith(
        "seq2seq_accum_grad_none_per_micro_batch.py:68: for p in parameters:")
    assert sorted(found["names"]) == SEQ2SEQ
    # after both optimizers' steps, not between them
    inserted = next(e for e in found["edits"] if e["new"])
    assert inserted["start"][0] == 76
    assert inserted["new"] == "    for p in parameters:\n        p.grad = None\n"


@pytest.mark.parametrize("script", [
    "cnn_accum.py", "cnn_accum_zero_grad_first.py", "seq2seq_accum.py"])
def test_a_clear_once_per_update_is_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and report["findings"] == []


def test_per_example_gradients_read_before_they_are_cleared_are_not_lost(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "dpsgd_per_sample.py")
    assert code == 0 and failures(report) == []


def test_gradient_cleared_after_another_optimizer_stepped_with_it_is_not_lost(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "gan_generator_first.py")
    assert code == 0 and failures(report) == []
    # the discriminator's part of the generator's loss: work done in vain, information
    (wasted,) = [f for f in report["findings"] if f["kind"] == "wasted"]
    assert all(n.startswith("netD.") for n in wasted["names"])


def test_two_backward_calls_summed_before_the_step_are_no_finding(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "actor_critic_two_backward.py")
    assert code == 0 and report["findings"] == []


def test_gradient_cleared_after_another_optimizer_stepped_without_it_is_not_lost(tmp_path):
    """DDPG's update (Lillicrap et al. 2016) with the actor's action detached: the actor's
    loss reaches the critic only, the actor's step finds nothing, and the critic's
    ``zero_grad()`` clears that gradient at the next iteration. The step it preceded was the
    actor optimizer's: the critic's part is wasted work (information), not a lost gradient
    (what the audit says of the actor itself is another rule's)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
        "actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))\n"
        "critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\n"
        "actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)\n"
        "critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)\n"
        "for _ in range(3):\n"
        "    s, a, r = torch.randn(16, 3), torch.randn(16, 1), torch.randn(16, 1)\n"
        "    critic_opt.zero_grad()\n"
        "    critic_loss = (critic(torch.cat([s, a], 1)) - r).pow(2).mean()\n"
        "    critic_loss.backward()\n"
        "    critic_opt.step()\n"
        "    actor_opt.zero_grad()\n"
        "    actor_loss = -critic(torch.cat([s, actor(s).detach()], 1)).mean()\n"
        "    actor_loss.backward()\n"
        "    actor_opt.step()\n", encoding="utf-8")
    _, report = audit(tmp_path, script)
    assert "cleared" not in [f["kind"] for f in report["findings"]]
    (wasted,) = [f for f in report["findings"] if f["kind"] == "wasted"]
    assert all(n.startswith("critic.") for n in wasted["names"])


# --- the edit verified, written, and trains as the published twin --------------------------

PAIRS = [("cnn_accum.py", "cnn_accum_zero_grad_per_micro_batch.py"),
         ("seq2seq_accum.py", "seq2seq_accum_grad_none_per_micro_batch.py")]


@pytest.mark.slow
@pytest.mark.parametrize(("clean", "buggy"), PAIRS, ids=[p[1] for p in PAIRS])
def test_the_moved_clear_is_verified_and_trains_as_the_published_script(tmp_path, clean, buggy):
    folder = project(tmp_path, buggy, clean)
    applied(folder, "cleared")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)


# a tiny regression trained with gradient accumulation: its set-up and its end (``--out``)
_HEAD = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""
_TAIL = """\
if args.out:
    torch.save(model.state_dict(), args.out)
"""


# a clear that is the only statement of an ``if`` on the loop's counter, firing between the
# micro-batches of each window (``!=`` for ``==``): the step trains on the last micro-batch only
_ACCUMULATED = _HEAD + """\
accum = 4
for i in range(16):
    x = torch.randn(8, 4)
    if i % accum {test} 0:
        optimizer.zero_grad()
    loss = model(x).pow(2).mean() / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
""" + _TAIL


@pytest.mark.slow
def test_a_clear_under_a_condition_between_micro_batches_goes_with_its_if(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "train.py").write_text(_ACCUMULATED.format(test="!="), encoding="utf-8")
    (folder / "published.py").write_text(_ACCUMULATED.format(test="=="), encoding="utf-8")
    done = applied(folder, "cleared", "--watch", "1")
    assert "train.py:14: if i % accum != 0:" in done.stdout   # the condition, then the clear
    assert "train.py:15: optimizer.zero_grad()" in done.stdout
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "if i % accum" not in fixed
    assert "        optimizer.step()\n        optimizer.zero_grad()\n" in fixed
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", "--watch", "1"))
    assert_trains_as(folder)


# the clear after a guard that skips it at each update's last micro-batch (``if need_update:
# continue`` for ``if not need_update: continue``): it drops the window's earlier micro-batches
# (cleared) and leaves the update's gradient to an epoch's last window of one micro-batch
# (stale). Each finding's edit is verified alone; made together they undo each other
_GUARDED = _HEAD + """\
accum, batches = 2, 5
for epoch in range(3):
    for b in range(batches):
        # an epoch's last window is shorter (timm's train_one_epoch)
        need_update = (b + 1) % accum == 0 or b == batches - 1
        loss = model(torch.randn(8, 4)).pow(2).mean() / accum
        loss.backward()
        if need_update:
            optimizer.step()
        if {test}need_update:
            continue
        optimizer.zero_grad()
""" + _TAIL


@pytest.mark.slow
def test_apply_writes_only_edits_that_hold_together(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "train.py").write_text(_GUARDED.format(test=""), encoding="utf-8")
    done = applied(folder, "cleared", "--watch", "1")
    assert "FAIL    stale:" in done.stdout
    assert "--apply did not write the edits of stale" in done.stdout
    assert "the edits of the cleared finding alone leave it clean" in done.stdout
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", "--watch", "1"))
    (folder / "published.py").write_text(_GUARDED.format(test="not "), encoding="utf-8")
    assert_trains_as(folder)
