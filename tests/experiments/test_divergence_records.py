"""The experiments that train through adversarial_training, train_simsiam, train_vq_vae and
td.gradient_descent record a divergence (``diverged_at`` in the variant's summary) instead of
carrying on: their metrics stop at the last finite epoch or step, and no NaN is written.

Each run diverges by construction: a loss poisoned with NaN at a chosen update of every model
(monkeypatched), an optimizer step that writes ``inf`` into a parameter (monkeypatched), or
Baird's counterexample at a step size where its expected iteration has spectral radius > 1.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch
from torch import nn

import toolkit.algorithms.adversarial.training as adversarial
import toolkit.algorithms.vq_vae as vq
from toolkit.algorithms.divergence import DivergenceWarning
from toolkit.lab import RunResults, run_experiment

NAN = float("nan")


def _no_nan(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isnan(value)
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_nan(v) for v in value)
    return True


def _check_files(run: RunResults) -> None:
    assert run.meta["status"] == "complete"
    assert _no_nan(run.summary) and all(_no_nan(row) for row in run.metrics)
    assert "NaN" not in (run.run_dir / "summary.json").read_text(encoding="utf-8")


def _third_call_poisoned(model: nn.Module) -> bool:
    """True at the third call for this model (a counter kept on the model itself)."""
    model._test_calls = getattr(model, "_test_calls", 0) + 1
    return model._test_calls == 3


class _InfAtThirdStep:
    """Patches an optimizer class so that its third step writes inf into its first parameter."""

    def __init__(self, cls: type[torch.optim.Optimizer]) -> None:
        self.real = cls.step

    def __call__(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        out = self.real(optimizer, *args, **kwargs)
        optimizer._test_steps = getattr(optimizer, "_test_steps", 0) + 1
        if optimizer._test_steps == 3:
            optimizer.param_groups[0]["params"][0].data.view(-1)[0] = float("inf")
        return out


# --------------------------------------------------------------------------------------------
# adversarial_training

ADVERSARIAL = {"hidden": [16], "epochs": 3, "n_train": 40, "batch_size": 20, "n_eval": 20,
               "check_size": 10, "eval_steps": 2, "eval_restarts": 1, "steps": 2,
               "methods": ["standard", "pgd"], "memory_steps": [1], "memory_batch": 8,
               "timing_repeat": 1, "grad_batch": 8, "n_examples": 4}


@pytest.mark.parametrize("how", ["loss", "parameter"])
def test_adversarial_experiment_records_where_training_diverged(
        how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # 40 examples in batches of 20: two updates per epoch, the third (update 2) diverges
    if how == "loss":  # the training loss of every model is NaN at its third update
        class Poisoned(adversarial.Objective):
            def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                losses, logits = super().__call__(x)
                return (losses * NAN if _third_call_poisoned(self.model) else losses), logits

        monkeypatch.setattr(adversarial, "Objective", Poisoned)
        expected = {"quantity": "loss", "applied": False}
    else:  # every model's third Adam step writes inf into its first weight
        monkeypatch.setattr(torch.optim.Adam, "step", _InfAtThirdStep(torch.optim.Adam))
        expected = {"quantity": "parameter 0.weight", "applied": True}
    with pytest.warns(DivergenceWarning):
        run = run_experiment("adversarial_training", ADVERSARIAL, device="cpu",
                             dtype="float64", disable_blocks=["adversarial.*"],
                             output_dir=tmp_path)
    _check_files(run)
    record = {"where": "adversarial_training", "step": 2, "epoch": 1, **expected}
    s = run.summary
    for variant, method in (("blocked", "standard"), ("blocked", "pgd"), ("unblocked", "pgd")):
        assert s[variant][method]["diverged_at"] == record, (variant, method)
        # one epoch completed and logged, nothing after it
        assert run.metric(f"{variant}/{method}/loss")[0].tolist() == [1], (variant, method)
        evaluated = "clean" in s[variant][method]
        assert evaluated == (how == "loss")  # finite parameters only are evaluated
    assert ("trained/linf" in s["gradients"]) == (how == "loss")


# --------------------------------------------------------------------------------------------
# simsiam and vq_vae

SIMSIAM = {"epochs": 4, "batch_size": 512, "hidden": 16, "dim": 8, "pred_hidden": 4}
VQ_VAE = {"epochs": 4, "batch_size": 700, "hidden": 16, "n_codes": 8}


def test_simsiam_experiment_records_a_parameter_that_overflowed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # 1347 training digits in batches of 512: two updates per epoch; the third SGD step of
    # each variant writes inf into the encoder's first weight
    monkeypatch.setattr(torch.optim.SGD, "step", _InfAtThirdStep(torch.optim.SGD))
    with pytest.warns(DivergenceWarning):
        run = run_experiment("simsiam", SIMSIAM, device="cpu", disable_blocks=["simsiam.*"],
                             output_dir=tmp_path)
    _check_files(run)
    for variant in ("blocked", "unblocked"):
        out = run.summary[variant]
        assert out["diverged_at"] == {"where": "train_simsiam",
                                      "quantity": "parameter encoder.0.weight", "step": 2,
                                      "epoch": 2, "applied": True}
        assert out["output_std_sqrt_d"] is None and out["knn_accuracy"] is None  # nothing
        assert out["final_loss"] == run.metric(f"{variant}/train/loss")[1][-1]  # epoch 1
        assert run.metric(f"{variant}/train/loss")[0].tolist() == [1]


def test_vq_vae_experiment_records_a_poisoned_loss(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Any) -> None:
    # 1347 training digits in batches of 700: two updates per epoch; every variant's third
    # training loss is NaN (and not applied: the model stays finite and is measured)
    real = vq.VQVAE.forward

    def forward(self: vq.VQVAE, x: torch.Tensor) -> vq.VQOutput:
        out = real(self, x)
        if torch.is_grad_enabled() and _third_call_poisoned(self):
            return out._replace(recon=out.recon * NAN)
        return out

    monkeypatch.setattr(vq.VQVAE, "forward", forward)
    with pytest.warns(DivergenceWarning):
        run = run_experiment("vq_vae", VQ_VAE, device="cpu", disable_blocks=["vq_vae.*"],
                             output_dir=tmp_path)
    _check_files(run)
    variants = ("blocked", "unblocked", "without_straight_through", "without_codebook",
                "without_commitment")
    for variant in variants:
        out = run.summary[variant]
        assert out["diverged_at"] == {"where": "train_vq_vae", "quantity": "loss", "step": 2,
                                      "epoch": 2, "applied": False}, variant
        assert math.isfinite(out["recon_mse"]) and math.isfinite(out["train_recon"])
        assert run.metric(f"{variant}/train/recon")[0].tolist() == [1]


# --------------------------------------------------------------------------------------------
# td_learning


def test_td_learning_presents_an_overflow_as_divergence_at_a_step(tmp_path: Any) -> None:
    # Baird at α = 10: the expected iterations have spectral radius 4.7 (semi-gradient) and
    # 21 (residual gradient, beyond its stable step size), so both squared TD errors overflow
    # long before 300 sweeps; the A-split and the random chain stay finite
    params = {"baird_alpha": 10.0, "baird_sweeps": 300, "a_split_steps": 20, "chain_steps": 20,
              "log_every": 10}
    with pytest.warns(DivergenceWarning, match=r"gradient_descent: the loss became non-finite"):
        run = run_experiment("td_learning", params, device="cpu", dtype="float64",
                             disable_blocks=["td.*"], output_dir=tmp_path)
    _check_files(run)
    s = run.summary
    for variant in ("blocked", "unblocked"):
        record = s["baird"][variant]["diverged_at"]
        assert record["quantity"] == "loss" and not record["applied"]
        assert 0 < record["step"] < 300
        steps, _ = run.metric(f"{variant}/baird/weight_norm")
        assert steps[-1] == record["step"]  # the last finite iterate, then nothing
        assert sorted(steps.tolist()) == steps.tolist()
        iterates = run.artifact("baird")[variant]
        assert len(iterates) == record["step"] + 1
        assert bool(torch.isfinite(torch.as_tensor(iterates)).all())
        assert "diverged_at" not in s["a_split"][variant]
        assert "diverged_at" not in s["chain"][variant]
    summary = json.loads((run.run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["baird"]["blocked"]["diverged_at"]["where"] == "gradient_descent"
    # the finding says where the run stopped instead of reporting an infinite norm as growth
    from stop_gradient_experiments import td_learning

    baird = next(f for f in td_learning.findings(run) if f.text.startswith("Baird"))
    stop = s["baird"]["blocked"]["diverged_at"]
    assert f"its loss overflowed to inf at sweep {stop['step']}, where the run stopped" in baird.text
