"""``toolkit.integrations.lightning.AuditCallback``, driven by Lightning's own ``Trainer.fit``.

The modules (``lightning_modules.py``) are written from public code: a pose-transfer GAN
from a Lightning issue, Lightning's basic GAN tutorial, and the "unused layer" example of
another issue. Each fit runs three batches of eight on the CPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning", reason="needs the [lightning] extra: pip install -e \".[lightning]\"")

import torch
from lightning.pytorch import Trainer
from lightning_modules import (
    BoringModel,
    ClosureGAN,
    PoseGAN,
    SkipsFirstBatch,
    TutorialGAN,
    loader,
)

from toolkit import GradientLeakError
from toolkit.integrations import AuditWarning
from toolkit.integrations.lightning import AuditCallback

pytestmark = pytest.mark.filterwarnings("ignore:.*does not have many workers",
                                        "ignore:.*is deprecated, use `isinstance",
                                        "ignore:.*smaller than the logging interval",
                                        "ignore:`training_step` returned `None`")


def fit(module, seed: int, callbacks=(), n_batches: int = 3) -> None:
    trainer = Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, callbacks=list(callbacks))
    torch.manual_seed(seed + 1)  # dropout and torch.randn in the step draw from here
    trainer.fit(module, loader(seed, n_batches))


def make(cls, seed: int, **kwargs):
    torch.manual_seed(seed)
    return cls(**kwargs)


GENERATOR = {f"generator.net.{i}.{p}" for i in (0, 1, 4) for p in ("weight", "bias")}


def test_a_gan_that_forgets_to_detach_the_fake_batch_is_caught(seed) -> None:
    gan = make(PoseGAN, seed, detach_fake=False)
    before = {k: v.clone() for k, v in gan.state_dict().items()}
    with pytest.raises(GradientLeakError) as caught:
        fit(gan, seed, [AuditCallback()])
    audit = caught.value.audit
    assert {leak.parameter for leak in audit.leaks} == GENERATOR
    assert {leak.loss for leak in audit.leaks} == {"errD"}  # named by the user's variable
    assert all("the output of generator" in leak.fix for leak in audit.leaks)
    # the located, proved fix: the line of training_step that hands the fake batch to the
    # discriminator's loss, not gan_loss's line (the generator step runs it too) nor a line
    # inside the discriminator's forward
    (line,) = {x for leak in audit.leaks for x in leak.lines}
    assert (line.file, line.function) == ("lightning_modules.py", "training_step")
    assert line.text.startswith('errD = self.gan_loss(drv_img, fake, opt_d=True)')
    assert f"at:   {line}" in str(caught.value)
    assert "training_step of batch 0" in str(caught.value)
    # raised before Lightning ran the step: nothing was trained
    assert all(torch.equal(before[k], v) for k, v in gan.state_dict().items())


def test_the_same_gan_with_the_detach_passes(seed) -> None:
    callback = AuditCallback()
    fit(make(PoseGAN, seed, detach_fake=True), seed, [callback])
    ((n, audit),) = callback.audits
    assert n == 0 and audit.ok and audit.losses == ("errD", "errG")
    # the generator's step passes through the discriminator: information, not a failure
    assert {p.loss for p in audit.pass_through} == {"errG"}
    assert {p.parameter.split(".")[0] for p in audit.pass_through} == {"discriminator"}


def test_toggle_optimizer_is_honoured(seed) -> None:
    """Without its detach, the tutorial's discriminator step is still clean: toggle_optimizer
    froze the generator while the fake batch was made again, and the audit runs the toggle."""
    callback = AuditCallback()
    fit(make(TutorialGAN, seed, detach_fake=False), seed, [callback])
    ((_, audit),) = callback.audits
    assert audit.ok and audit.losses == ("g_loss", "d_loss")
    assert not audit.pass_through  # the toggle froze the discriminator in the generator step


def test_closures_and_a_bare_backward_are_recorded_not_run(seed) -> None:
    callback = AuditCallback()
    fit(make(ClosureGAN, seed), seed, [callback])
    ((_, audit),) = callback.audits
    assert audit.ok and audit.losses == ("loss_gen", "loss_dis")
    assert audit.n_stepped == 8


def test_automatic_optimization_with_an_unused_layer_is_caught(seed) -> None:
    with pytest.raises(GradientLeakError) as caught:
        fit(make(BoringModel, seed), seed, [AuditCallback()])
    dead = caught.value.audit.dead
    assert {d.parameter for d in dead} == {"layer2.weight", "layer2.bias"}
    assert {d.kind for d in dead} == {"not_used"}
    callback = AuditCallback()
    fit(make(BoringModel, seed, use_layer2=True), seed, [callback])
    assert callback.audits[0][1].ok


def test_a_batch_without_a_loss_moves_the_audit_to_the_next(seed) -> None:
    callback = AuditCallback()
    with pytest.warns(UserWarning, match="batch 0 cannot be audited: training_step returned no "
                                         "loss; the audit moves on"):
        fit(make(SkipsFirstBatch, seed, use_layer2=True), seed, [callback])
    assert [n for n, _ in callback.audits] == [1] and callback.audits[0][1].ok


def test_warn_reports_and_training_goes_on(seed) -> None:
    callback = AuditCallback(on_finding="warn", every_n_steps=2)
    gan = make(PoseGAN, seed, detach_fake=False)
    with pytest.warns(AuditWarning, match="LEAK    loss 'errD' reaches 6 tensors"):
        fit(gan, seed, [callback], n_batches=5)
    assert [n for n, _ in callback.audits] == [0, 2, 4]
    assert gan.trainer.global_step == 10  # five batches, two optimizer steps each


@pytest.mark.parametrize(("cls", "kwargs"), [(PoseGAN, {}), (TutorialGAN, {}), (ClosureGAN, {}),
                                             (BoringModel, {"use_layer2": True})],
                         ids=["manual-retain-graph", "manual-toggle", "manual-closure",
                              "automatic"])
def test_watching_never_changes_what_is_trained(cls, kwargs, seed) -> None:
    """Every batch audited (dropout, BatchNorm, torch.randn in the step, the optimizers'
    state): the weights and buffers after fit are the same bits as without the callback."""
    plain, watched = make(cls, seed, **kwargs), make(cls, seed, **kwargs)
    fit(plain, seed)
    callback = AuditCallback(every_n_steps=1)
    fit(watched, seed, [callback])
    assert len(callback.audits) == 3
    mismatched = [k for k, v in plain.state_dict().items()
                  if not torch.equal(v, watched.state_dict()[k])]
    assert not mismatched
    assert any(not torch.equal(v, make(cls, seed, **kwargs).state_dict()[k])
               for k, v in plain.state_dict().items())  # and training did change them


@pytest.mark.slow
def test_under_ddp_every_process_stops_and_none_hangs() -> None:
    """Lightning's ``ddp_spawn`` on two CPU processes: the audits agree across processes
    before raising, so ``fit`` ends with the leak instead of a process left waiting."""
    env = dict(os.environ)
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: no network needed
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("lightning_ddp_fit.py"))],
                          capture_output=True, text=True, timeout=240, env=env)
    assert "GradientLeakError: AuditCallback: training_step of batch 0" in done.stdout, (
        done.stdout[-3000:] + done.stderr[-3000:])
    assert "LEAK    loss 'errD' reaches 6 tensors" in done.stdout


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"every_n_steps": 0}, r"AuditCallback: every_n_steps must be None .* got 0"),
    ({"every_n_steps": 1.5}, r"AuditCallback: every_n_steps must be None .* got 1.5"),
    ({"on_finding": "log"}, r"AuditCallback: on_finding must be 'raise' or 'warn', got 'log'"),
])
def test_bad_options_are_refused(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        AuditCallback(**kwargs)
    with pytest.raises(TypeError, match="AuditCallback: allow_pass_through must be a bool"):
        AuditCallback(allow_pass_through="yes")
