"""Divergence detection in the RBM's one training loop (train_cd and BernoulliRBM): it stops at
the first non-finite value, records where, warns once and applies nothing more.

Every case diverges by construction, not by a lucky trajectory: with learning_rate · weight_decay
= 1e308 an update multiplies every weight by (1 − 1e308) (plus a gradient bounded by 1), so the
weights reach about 1e306 after the first update and overflow to inf in the second, for every
seed, every start and every BLAS."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from toolkit.algorithms.divergence import Divergence, DivergenceWarning
from toolkit.algorithms.rbm import BernoulliRBM, init_params, train_cd, training
from toolkit.lab.data import bars_and_stripes

OVERFLOW = {"learning_rate": 1.0, "weight_decay": 1e308}


def data() -> torch.Tensor:
    return bars_and_stripes(3, dtype=torch.float64)  # 14 patterns of 9 pixels


@pytest.mark.parametrize("method", ["cd", "pcd"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_train_cd_stops_at_the_update_that_overflows(method: str, seed: int) -> None:
    X = data()
    p = init_params(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    updates: list[int] = []
    with pytest.warns(DivergenceWarning, match=r"train_cd: the weights became non-finite "
                                              r"\(inf or nan\) at update 1 \(epoch 0\)") as rec:
        state = train_cd(p, X, method=method, batch_size=7, epochs=20, **OVERFLOW,
                         generator=torch.Generator().manual_seed(seed),
                         callback=lambda step: updates.append(step.batch))
    assert len(rec) == 1
    assert state.divergence == Divergence("train_cd", "weights", 1, 0, True)
    assert state.n_updates == 2 and updates == [0, 1]  # no update after the overflow
    assert not state.stopped  # stopped by the check, not by a callback
    assert not bool(torch.isfinite(p.weights).all())


def test_a_non_finite_gradient_is_never_applied(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    # inject a nan into the third update's weight gradient: it must not be applied
    real = training.cd_loss_grads
    calls = []

    def poisoned(*args, **kwargs):
        grads, prob = real(*args, **kwargs)
        calls.append(None)
        if len(calls) == 3:
            grads = grads._replace(weights=grads.weights.clone().index_fill_(1, torch.tensor([2]),
                                                                             float("nan")))
        return grads, prob

    monkeypatch.setattr(training, "cd_loss_grads", poisoned)
    X = data()
    p = init_params(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    seen = []
    with pytest.warns(DivergenceWarning, match=r"the gradient of the weights became non-finite "
                                              r"\(inf or nan\) at update 2 \(epoch 1\)"):
        state = train_cd(p, X, batch_size=7, epochs=5, generator=torch.Generator().manual_seed(seed),
                         callback=lambda step: seen.append([t.clone() for t in step.params]))
    assert state.divergence == Divergence("train_cd", "gradient of the weights", 2, 1, False)
    assert state.n_updates == 2 and len(calls) == 3
    for a, b in zip(seen[-1], p):  # the parameters are those the poisoned update started from
        assert torch.equal(a, b)


def test_non_finite_starting_parameters_are_refused(seed: int) -> None:
    p = init_params(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    p.visible_bias.data[0] = float("nan")
    with pytest.raises(ValueError, match=r"train_cd: params.visible_bias must be finite"):
        train_cd(p, data(), batch_size=7)


def test_a_diverged_state_is_not_trained_further(seed: int) -> None:
    X = data()
    p = init_params(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    with pytest.warns(DivergenceWarning):
        state = train_cd(p, X, batch_size=7, epochs=3, **OVERFLOW)
    with pytest.raises(ValueError, match=r"params.weights must be finite.*a state that diverged"):
        train_cd(p, X, batch_size=7, epochs=3, state=state, **OVERFLOW)
    assert state.n_updates == 2


def test_finite_training_sets_no_divergence(seed: int) -> None:
    X = data()
    p = init_params(9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)
        state = train_cd(p, X, batch_size=7, epochs=3)
    assert state.divergence is None and state.n_updates == 6


def test_a_step_that_does_not_fit_the_dtype_is_refused(seed: int) -> None:
    p = init_params(9, 4, dtype=torch.float32, generator=torch.Generator().manual_seed(seed))
    with pytest.raises(ValueError, match=r"train_cd: weight_decay=1e\+308 does not fit the "
                                         r"parameters' torch.float32"):
        train_cd(p, data().float(), batch_size=7, **OVERFLOW)


@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_estimator_records_the_divergence_and_keeps_what_it_has(method: str, seed: int) -> None:
    X = data().numpy()
    rbm = BernoulliRBM(n_components=4, n_iter=10, batch_size=7, random_state=seed, method=method,
                       **OVERFLOW)
    with pytest.warns(DivergenceWarning, match=r"^BernoulliRBM: the weights became non-finite"):
        rbm.fit(X)
    assert rbm.divergence_ == Divergence("BernoulliRBM", "weights", 1, 0, True)
    assert rbm.n_iter_ == 0 and rbm.n_updates_ == 2
    assert isinstance(rbm.components_, np.ndarray) and not np.isfinite(rbm.components_).all()
    with pytest.warns(DivergenceWarning):  # partial_fit applies nothing on non-finite weights
        rbm.partial_fit(X)
    assert rbm.n_updates_ == 2
    # a new fit starts afresh
    rbm.set_params(weight_decay=0.0).fit(X)
    assert rbm.divergence_ is None and rbm.n_iter_ == 10


def test_the_warning_points_at_the_callers_line(seed: int) -> None:
    X = data().numpy()
    with pytest.warns(DivergenceWarning) as rec:
        BernoulliRBM(n_components=4, n_iter=3, batch_size=7, random_state=seed, **OVERFLOW).fit(X)
    assert rec[0].filename == __file__
