"""Divergence detection in the training loops beyond the RBM: adversarial_training,
train_simsiam, train_vq_vae and td.gradient_descent stop at the first non-finite value, record
where, warn once and apply nothing more.

Every case diverges by construction, never by a lucky trajectory:

- a loss poisoned with NaN at a chosen update (a ``loss_fn`` argument or a monkeypatched
  loss): the update is not applied, and the parameters are those of a run stopped one update
  earlier;
- a step that overflows a parameter: SGD with ``weight_decay = 1e308`` on a parameter set to 2
  (``2 · 1e308`` is beyond float64's 1.8e308) while every other parameter is at most 1 in
  magnitude, or an optimizer step monkeypatched to write ``inf``;
- examples that the attack makes NaN (a model that is NaN in eval mode, where the attack runs:
  an L2 step normalises the NaN input gradient to NaN);
- for gradient descent: a loss, a gradient (``√|w|`` at 0) or an iterate (``−1e308 − 1e308``)
  that is not finite, and Baird's counterexample, whose expected semi-gradient iteration has
  spectral radius > 1 (Sutton & Barto, Example 11.1), so its squared TD error overflows.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import toolkit.algorithms.simsiam as ss
import toolkit.algorithms.vq_vae as vq
from toolkit import disable_blocks
from toolkit.algorithms import td
from toolkit.algorithms.adversarial import adversarial_training
from toolkit.algorithms.divergence import (
    Divergence,
    DivergenceWarning,
    History,
    UpdateCheck,
    check_finite,
    check_step_fits,
)

F64 = torch.float64
NAN = float("nan")


def _poison_call(n: int, fn: Callable[..., Any], poison: Callable[[Any], Any]
                 ) -> tuple[Callable[..., Any], list[None]]:
    """``fn`` whose ``n``-th call (from 1) returns ``poison(result)``; the list counts calls."""
    calls: list[None] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        calls.append(None)
        return poison(out) if len(calls) == n else out
    return wrapped, calls


def _one_divergence_warning(record: Any) -> None:
    assert len([w for w in record if issubclass(w.category, DivergenceWarning)]) == 1


def _state(model: nn.Module) -> list[torch.Tensor]:
    return [t.clone() for t in model.state_dict().values()]


def _assert_same_parameters(a: nn.Module, b: nn.Module) -> None:
    """Equal parameters (buffers such as BatchNorm's running statistics also saw the forward
    pass of the update that was not applied)."""
    for (name, x), y in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(x, y), name


# --------------------------------------------------------------------------------------------
# adversarial_training


def _pair(n: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 4, generator=g, dtype=F64), torch.arange(n) % 3


def _linear(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(4, 3, dtype=F64)  # weights and biases within ±1/√4 = ±0.5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adversarial_training_stops_at_a_poisoned_loss(seed: int) -> None:
    # 8 examples in batches of 4: two updates per epoch; the third loss (update 2, the first of
    # epoch 1) is NaN and must not be applied
    loss_fn, calls = _poison_call(3, lambda logits, y: F.cross_entropy(logits, y,
                                                                       reduction="none"),
                                  lambda losses: losses * NAN)
    model, reference = _linear(seed), _linear(seed)
    kw = {"method": "standard", "epochs": 5, "batch_size": 4, "check_size": 4}
    with pytest.warns(DivergenceWarning, match=r"^adversarial_training: the loss became "
                                              r"non-finite \(inf or nan\) at update 2 "
                                              r"\(epoch 1\); training stopped there") as rec:
        history = adversarial_training(model, _pair(seed=seed),
                                       torch.optim.SGD(model.parameters(), lr=0.5),
                                       loss_fn=loss_fn, generator=torch.Generator().manual_seed(0),
                                       **kw)
    _one_divergence_warning(rec)
    assert history.divergence == Divergence("adversarial_training", "loss", 2, 1, False)
    assert len(calls) == 3 and history.epoch == [0]  # the epoch completed before it
    assert history.to_dict()["divergence"] == {"where": "adversarial_training",
                                               "quantity": "loss", "step": 2, "epoch": 1,
                                               "applied": False}
    # the parameters are those of the same run stopped after its first epoch
    adversarial_training(reference, _pair(seed=seed),
                         torch.optim.SGD(reference.parameters(), lr=0.5),
                         generator=torch.Generator().manual_seed(0), **{**kw, "epochs": 1})
    _assert_same_parameters(model, reference)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adversarial_training_stops_at_the_step_that_overflows_a_parameter(seed: int) -> None:
    model = _linear(seed)
    with torch.no_grad():
        model.bias[1] = 2.0  # decay 1e308 · 2 overflows; every other entry is at most 0.5
    opt = torch.optim.SGD(model.parameters(), lr=1.0, weight_decay=1e308)
    with pytest.warns(DivergenceWarning, match=r"the parameter bias became non-finite .* at "
                                              r"update 0 \(epoch 0\)") as rec:
        history = adversarial_training(model, _pair(seed=seed), opt, method="fgsm", epochs=3,
                                       eps=0.1, batch_size=4)
    _one_divergence_warning(rec)
    assert history.divergence == Divergence("adversarial_training", "parameter bias", 0, 0, True)
    assert history.epoch == [] and history.loss == []  # no epoch completed
    assert bool(torch.isinf(model.bias[1])) and bool(torch.isfinite(model.weight).all())
    with pytest.raises(ValueError, match=r"adversarial_training: the parameter bias must be "
                                         r"finite before training, got inf or nan"):
        adversarial_training(model, _pair(), opt, method="fgsm", epochs=1, batch_size=4)


class NanInEval(nn.Module):
    """The identity in training mode, NaN in eval mode (where the attack runs)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.training else x * NAN


def test_adversarial_training_stops_at_non_finite_examples(seed: int) -> None:
    # The attack sees NaN logits, so a NaN input gradient, which an L2 step normalises to NaN:
    # the examples are NaN, found before the loss at them (NaN as well) is applied.
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 3, dtype=F64), NanInEval())
    before = _state(model)
    with pytest.warns(DivergenceWarning, match=r"the adversarial examples became non-finite "
                                              r"\(inf or nan\) at update 0 \(epoch 0\)") as rec:
        history = adversarial_training(model, _pair(), torch.optim.SGD(model.parameters(),
                                                                       lr=0.5),
                                       method="pgd", norm="l2", eps=0.5, steps=2, epochs=2,
                                       batch_size=4, generator=torch.Generator().manual_seed(seed))
    _one_divergence_warning(rec)
    assert history.divergence == Divergence("adversarial_training", "adversarial examples", 0,
                                            0, False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.state_dict().values()))


def test_adversarial_training_without_divergence_records_none(seed: int) -> None:
    model = _linear(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        history = adversarial_training(model, _pair(), torch.optim.SGD(model.parameters(),
                                                                       lr=0.5),
                                       method="pgd", eps=0.1, steps=2, epochs=2, batch_size=4,
                                       generator=torch.Generator().manual_seed(seed))
    assert history.divergence is None and history.to_dict()["divergence"] is None
    assert history.epoch == [0, 1]


# --------------------------------------------------------------------------------------------
# train_simsiam and train_vq_vae


def _images(n: int = 32) -> torch.Tensor:
    return torch.rand(n, 64, generator=torch.Generator().manual_seed(5), dtype=F64)


def _simsiam(seed: int = 0) -> ss.SimSiam:
    torch.manual_seed(seed)
    return ss.SimSiam(64, hidden=16, dim=8, pred_hidden=4, dtype=F64)


def _vq_vae(seed: int = 0) -> vq.VQVAE:
    torch.manual_seed(seed)
    return vq.VQVAE(64, n_latents=2, latent_dim=3, n_codes=4, hidden=16, dtype=F64)


def _train_simsiam(model: ss.SimSiam, epochs: int, **kw: Any) -> History:
    return ss.train_simsiam(model, _images(), epochs=epochs, batch_size=16,
                            generator=torch.Generator().manual_seed(0), **kw)


def _train_vq_vae(model: vq.VQVAE, epochs: int, **kw: Any) -> History:
    return vq.train_vq_vae(model, _images(), epochs=epochs, batch_size=16,
                           generator=torch.Generator().manual_seed(0), **kw)


@pytest.mark.parametrize("seed", [0, 1])
def test_train_simsiam_stops_at_a_poisoned_loss(seed: int, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    # 32 rows in batches of 16: two updates per epoch; the third loss (update 2, epoch 2)
    loss, calls = _poison_call(3, ss.simsiam_loss, lambda out: out * NAN)
    monkeypatch.setattr(ss, "simsiam_loss", loss)
    model, reference = _simsiam(seed), _simsiam(seed)
    with pytest.warns(DivergenceWarning, match=r"^train_simsiam: the loss became non-finite "
                                              r"\(inf or nan\) at update 2 \(epoch 2\)") as rec:
        rows = _train_simsiam(model, 5)
    _one_divergence_warning(rec)
    assert rows.divergence == Divergence("train_simsiam", "loss", 2, 2, False)
    assert len(calls) == 3 and len(rows) == 1 and isinstance(rows, list)
    monkeypatch.undo()
    assert rows == _train_simsiam(reference, 1)  # the same first epoch, then nothing applied
    _assert_same_parameters(model, reference)


def test_train_simsiam_stops_at_the_step_that_overflows_a_parameter() -> None:
    model = _simsiam()
    with torch.no_grad():  # BatchNorm's scale; the Linear weights are within ±1/√64
        model.encoder[1].weight.fill_(2.0)
    with pytest.warns(DivergenceWarning, match=r"the parameter encoder.1.weight became "
                                              r"non-finite .* at update 0 \(epoch 1\)") as rec:
        rows = _train_simsiam(model, 3, lr=1.0, weight_decay=1e308)
    _one_divergence_warning(rec)
    assert rows.divergence == Divergence("train_simsiam", "parameter encoder.1.weight", 0, 1,
                                         True)
    assert rows == [] and bool(torch.isinf(model.encoder[1].weight).all())
    with pytest.raises(ValueError, match=r"train_simsiam: the parameter encoder.1.weight must "
                                         r"be finite before training"):
        _train_simsiam(model, 1)


def test_train_vq_vae_stops_at_a_poisoned_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    loss, calls = _poison_call(3, vq.VQOutput.loss, lambda out: out * NAN)
    monkeypatch.setattr(vq.VQOutput, "loss", loss)
    model, reference = _vq_vae(), _vq_vae()
    with pytest.warns(DivergenceWarning, match=r"^train_vq_vae: the loss became non-finite "
                                              r"\(inf or nan\) at update 2 \(epoch 2\)") as rec:
        rows = _train_vq_vae(model, 5)
    _one_divergence_warning(rec)
    assert rows.divergence == Divergence("train_vq_vae", "loss", 2, 2, False)
    assert len(calls) == 3 and len(rows) == 1
    monkeypatch.undo()
    assert rows == _train_vq_vae(reference, 1)
    _assert_same_parameters(model, reference)


class _InfAtSecondStep(torch.optim.Adam):
    """Adam whose second step writes inf into the codebook (a parameter set to inf)."""

    n_steps = 0

    def step(self, closure: Any = None) -> Any:
        out = super().step(closure)
        self.n_steps += 1
        if self.n_steps == 2:
            for group in self.param_groups:
                for p in group["params"]:
                    if p.shape == (4, 3):  # the codebook
                        p.data[0, 0] = float("inf")
        return out


def test_train_vq_vae_stops_at_a_parameter_set_to_inf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vq.torch.optim, "Adam", _InfAtSecondStep)
    model = _vq_vae()
    with pytest.warns(DivergenceWarning, match=r"the parameter codebook became non-finite .* "
                                              r"at update 1 \(epoch 1\)") as rec:
        rows = _train_vq_vae(model, 3)
    _one_divergence_warning(rec)
    assert rows.divergence == Divergence("train_vq_vae", "parameter codebook", 1, 1, True)
    assert rows == []


def test_simsiam_and_vq_vae_without_divergence_return_plain_rows() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        rows = _train_simsiam(_simsiam(), 2)
        vq_rows = _train_vq_vae(_vq_vae(), 2)
    for r in (rows, vq_rows):
        assert isinstance(r, list) and len(r) == 2 and r.divergence is None


def test_a_step_size_the_dtype_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match=r"train_simsiam: weight_decay=1e\+300 does not fit "
                                         r"the parameters' torch.float32"):
        ss.train_simsiam(ss.SimSiam(64, hidden=8, dim=4), _images().float(), epochs=1,
                         batch_size=16, weight_decay=1e300, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"train_vq_vae: lr=1e\+39 does not fit the "
                                         r"parameters' torch.float32 \(at most 3.40282e\+38\)"):
        vq.train_vq_vae(vq.VQVAE(64, hidden=8), _images().float(), epochs=1, lr=1e39,
                        generator=torch.Generator())


# --------------------------------------------------------------------------------------------
# td.gradient_descent


def test_gradient_descent_stops_when_the_weights_overflow() -> None:
    # ∇(w₁ + w₂) = (1, 1) exactly: the first step takes w₁ = −1e308 to −2e308 = −inf
    w0 = torch.tensor([-1e308, 0.0], dtype=F64)
    with pytest.warns(DivergenceWarning, match=r"^gradient_descent: the weights became "
                                              r"non-finite \(inf or nan\) at update 0; ") as rec:
        path = td.gradient_descent(lambda w: w.sum(), w0, lr=1e308, n_steps=5)
    _one_divergence_warning(rec)
    assert path.divergence == Divergence("gradient_descent", "weights", 0, None, True)
    assert torch.equal(path, w0[None])  # the finite iterates only


@pytest.mark.parametrize(("loss_fn", "quantity"), [
    (lambda w: (w * 1e200).pow(2).sum(), "loss"),  # (1e200)² overflows
    (lambda w: w.abs().sqrt().sum(), "gradient"),  # d√|w|/dw at w = 0: 0 · inf
])
def test_gradient_descent_never_applies_a_non_finite_loss_or_gradient(
        loss_fn: Callable[[torch.Tensor], torch.Tensor], quantity: str) -> None:
    w0 = torch.tensor([1.0, 0.0], dtype=F64)
    with pytest.warns(DivergenceWarning, match=rf"the {quantity} became non-finite") as rec:
        path = td.gradient_descent(loss_fn, w0, lr=0.1, n_steps=3)
    _one_divergence_warning(rec)
    assert path.divergence == Divergence("gradient_descent", quantity, 0, None, False)
    assert torch.equal(path, w0[None])


def test_gradient_descent_on_baird_stops_where_the_squared_td_error_overflows() -> None:
    # the expected semi-gradient iteration w ← (I − α M) w has spectral radius 4.7 at α = 10:
    # ‖w‖ passes 1e154 within about 230 sweeps and the loss (quadratic in w) overflows first
    mrp, w0 = td.baird_counterexample()
    with pytest.warns(DivergenceWarning, match=r"the loss became non-finite") as rec:
        path = td.gradient_descent(mrp.loss, w0, lr=10.0, n_steps=400)
    _one_divergence_warning(rec)
    div = path.divergence
    assert (div.quantity, div.applied) == ("loss", False) and 100 < div.step < 400
    assert len(path) == div.step + 1 and bool(torch.isfinite(path).all())
    assert bool(torch.isinf(mrp.loss(path[-1]))) and bool(torch.isfinite(mrp.loss(path[-2])))
    # growth is not divergence: at the book's step size the weights grow, all finite
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        grown = td.gradient_descent(mrp.loss, w0, lr=0.01, n_steps=300)
        with disable_blocks(td.BLOCK):
            converging = td.gradient_descent(mrp.loss, w0, lr=0.01, n_steps=300)
    assert grown.divergence is None and converging.divergence is None
    assert grown.shape == (301, 8) and float(grown[-1].norm()) > float(grown[0].norm())


def test_gradient_descent_refuses_non_finite_or_unrepresentable_input() -> None:
    with pytest.raises(ValueError, match=r"gradient_descent: w0 must be finite, got inf or nan"):
        td.gradient_descent(lambda w: w.sum(), torch.tensor([0.0, NAN]), lr=0.1, n_steps=1)
    with pytest.raises(ValueError, match=r"gradient_descent: lr=1e\+300 does not fit the "
                                         r"parameters' torch.float32"):
        td.gradient_descent(lambda w: w.sum(), torch.zeros(2), lr=1e300, n_steps=1)
    with pytest.raises(TypeError, match=r"gradient_descent: w0 must be a floating-point "
                                        r"tensor, got dtype torch.int64"):
        td.gradient_descent(lambda w: w.sum(), torch.zeros(2, dtype=torch.long), lr=0.1,
                            n_steps=1)


# --------------------------------------------------------------------------------------------
# the shared pieces


def test_update_check_counts_updates_and_names_what_failed() -> None:
    w = torch.zeros(3, requires_grad=True)
    check = UpdateCheck("loop", [("weights", w)])
    check.check_start()
    w.grad = torch.ones(3)
    assert not check.before_step(("loss", torch.tensor(1.0)), epoch=4)
    assert not check.after_step(epoch=4) and check.n_updates == 1
    with torch.no_grad():
        w[0] = float("inf")
    with pytest.warns(DivergenceWarning, match=r"loop: the weights became non-finite .* at "
                                              r"update 1 \(epoch 5\)"):
        assert check.after_step(epoch=5)
    assert check.divergence == Divergence("loop", "weights", 1, 5, True)


def test_history_is_a_list_that_copies_with_its_record() -> None:
    rows = History([{"loss": 1.0}], Divergence("loop", "loss", 3))
    twin = copy.deepcopy(rows)
    assert twin == [{"loss": 1.0}] and twin.divergence == rows.divergence
    assert History().divergence is None
    check_step_fits("loop", F64, lr=1e308)  # fits float64


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), NAN])
def test_check_finite_on_every_kind_of_tensor(bad: float) -> None:
    fine = [("ints", torch.arange(3)), ("flags", torch.ones(2, dtype=torch.bool)),
            ("empty", torch.empty(0)), ("half", torch.full((2,), 65504.0, dtype=torch.float16)),
            ("largest", torch.full((3,), torch.finfo(F64).max, dtype=F64)),
            ("complex", torch.ones(2, dtype=torch.complex64)),
            ("leaf", torch.ones(2, requires_grad=True))]
    assert check_finite(fine) is None
    for name, t in (("h", torch.tensor([1.0, bad], dtype=torch.float16)),
                    ("z", torch.tensor([1 + 0j, complex(0.0, bad)])),
                    ("w", torch.tensor([[0.0], [bad]], requires_grad=True))):
        assert check_finite([*fine, (name, t), ("after", torch.full((1,), bad))]) == name
