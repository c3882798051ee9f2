"""Tests for toolkit.algorithms.rbm.likelihood against brute-force enumeration, enumerated
statistics, AIS on exactly solvable models and scikit-learn's pseudo-likelihood."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rbm_testutil import F64, all_binary, brute_force_log_z, random_params, sklearn_rbm

from toolkit.algorithms.rbm import (
    BernoulliRBM,
    RBMParams,
    ais_log_partition,
    exact_log_likelihood_gradient,
    exact_log_partition,
    free_energy,
    log_likelihood,
    pseudo_log_likelihood,
)
from toolkit.lab.data import binarized_digits


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_exact_log_partition_matches_brute_force(shape: tuple[int, int], seed: int) -> None:
    n_visible, n_hidden = shape
    p = random_params(n_visible, n_hidden, seed=seed + 1)
    expected = brute_force_log_z(p)
    assert abs(float(exact_log_partition(p)) - expected) < 1e-10
    # chunked enumeration gives the same number
    assert abs(float(exact_log_partition(p, chunk_elements=7)) - expected) < 1e-10


def test_log_likelihood_normalises(seed: int) -> None:
    p = random_params(6, 4, seed=seed + 2)
    total = torch.logsumexp(log_likelihood(p, all_binary(6)), dim=0)
    assert abs(float(total)) < 1e-10


def test_exact_log_likelihood_gradient_matches_enumerated_statistics(seed: int) -> None:
    p = random_params(5, 3, scale=0.7, seed=seed + 3)
    v = all_binary(5)[torch.tensor([1, 6, 17, 30])]
    W, _, c = p
    # model expectations by enumerating every visible state
    V = all_binary(5)
    pv = torch.softmax(-free_energy(p, V), dim=0)
    hV = torch.sigmoid(V @ W.T + c)
    model_vh = (pv[:, None, None] * hV[:, :, None] * V[:, None, :]).sum(0)
    hd = torch.sigmoid(v @ W.T + c)
    data_vh = (hd[:, :, None] * v[:, None, :]).mean(0)
    g = exact_log_likelihood_gradient(p, v)
    torch.testing.assert_close(g.weights, -(data_vh - model_vh), rtol=0, atol=1e-12)
    torch.testing.assert_close(g.visible_bias, -(v.mean(0) - pv @ V), rtol=0, atol=1e-12)
    torch.testing.assert_close(g.hidden_bias, -(hd.mean(0) - pv @ hV), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------- AIS and pseudo-LL


@pytest.mark.slow
def test_ais_within_a_tenth_of_a_nat_of_exact_on_a_trained_64x16_model(seed: int) -> None:
    X = binarized_digits(dtype=F64).X
    rbm = BernoulliRBM(16, method="cd", learning_rate=0.05, batch_size=20, n_iter=4,
                       shuffle=True, random_state=seed, dtype=F64).fit(X)
    p = RBMParams(rbm.components_, rbm.intercept_visible_, rbm.intercept_hidden_)
    exact = float(exact_log_partition(p))
    result = ais_log_partition(p, data=X, n_runs=100, betas=3000,
                               generator=torch.Generator().manual_seed(seed))
    assert abs(float(result.log_partition) - exact) < 0.1
    assert 0 < float(result.stderr) < 0.1
    assert result.log_weights.shape == (100,)


def test_ais_is_exact_for_the_base_rate_model() -> None:
    # W = 0, c = 0 and b = base-rate biases: every importance weight is 1, log Ẑ is exact
    b = torch.tensor([0.3, -1.0, 2.0], dtype=F64)
    p = RBMParams(torch.zeros(2, 3, dtype=F64), b, torch.zeros(2, dtype=F64))
    result = ais_log_partition(p, base_visible_bias=b, n_runs=10, betas=20)
    assert abs(float(result.log_partition) - float(exact_log_partition(p))) < 1e-12
    assert float(result.stderr) < 1e-12


def test_pseudo_log_likelihood_matches_scikit_learn_with_the_same_flips() -> None:
    p = random_params(12, 5, seed=8)
    X = (torch.rand(40, 12, generator=torch.Generator().manual_seed(0)) < 0.4).to(F64)
    seed = 3
    sk = sklearn_rbm(p, 12, seed)
    # scikit-learn draws the flipped unit of each row as RandomState(seed).randint(0, V, n)
    idx = np.random.RandomState(seed).randint(0, 12, 40)
    ours = pseudo_log_likelihood(p, X, indices=torch.as_tensor(idx))
    np.testing.assert_allclose(ours.numpy(), sk.score_samples(X.numpy()), rtol=1e-12, atol=1e-12)


def test_pseudo_log_likelihood_sums_every_conditional(seed: int) -> None:
    p = random_params(8, 4, seed=seed + 9)
    X = all_binary(8)[torch.tensor([5, 77, 200])]
    # Σ_i log P(v_i | v_-i) from the conditional probabilities themselves: P(v_i = 1 | v_-i)
    # = p*(v with v_i=1) / (p*(v with v_i=1) + p*(v with v_i=0)), p* = exp(−F)
    exact = torch.zeros(3, dtype=F64)
    for i in range(8):
        on, off = X.clone(), X.clone()
        on[:, i], off[:, i] = 1.0, 0.0
        p_on = torch.sigmoid(free_energy(p, off) - free_energy(p, on))
        exact += torch.where(X[:, i] == 1, p_on, 1 - p_on).log()
    ours = pseudo_log_likelihood(p, X)
    torch.testing.assert_close(ours, exact, rtol=0, atol=1e-12)
    # deterministic, row by row: chunking and the other rows do not change a row's value
    torch.testing.assert_close(pseudo_log_likelihood(p, X, chunk_elements=1), ours, rtol=0,
                               atol=1e-13)
    torch.testing.assert_close(pseudo_log_likelihood(p, X[[2, 0]]), ours[[2, 0]], rtol=0,
                               atol=1e-13)
    # scikit-learn's one-flip estimate is unbiased for it: averaged over the flipped unit it
    # gives the sum exactly
    one_flip = torch.stack([pseudo_log_likelihood(p, X, indices=torch.full((3,), i))
                            for i in range(8)])
    torch.testing.assert_close(one_flip.mean(0), ours, rtol=0, atol=1e-12)


def test_pseudo_log_likelihood_of_values_in_the_unit_interval(seed: int) -> None:
    # scikit-learn's formula on fractional values: v_i flips to 1 − v_i
    p = random_params(6, 3, seed=seed + 4)
    X = torch.rand(5, 6, generator=torch.Generator().manual_seed(seed + 1), dtype=F64)
    sk = sklearn_rbm(p, 6, 0)
    rows = np.arange(5)
    expected = np.zeros(5)
    for i in range(6):
        flipped = X.numpy().copy()
        flipped[rows, i] = 1 - flipped[rows, i]
        expected += np.log(1 / (1 + np.exp(-(sk._free_energy(flipped)
                                              - sk._free_energy(X.numpy())))))
    np.testing.assert_allclose(pseudo_log_likelihood(p, X).numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("bias_scale", [0.0, 50.0])
def test_float32_pseudo_log_likelihood_does_not_cancel(bias_scale: float, seed: int) -> None:
    # A trained RBM's hidden pre-activations reach tens: softplus(a + δW) − softplus(a) formed
    # as the difference of the two values loses u·|a| per term in float32. The float32 sums
    # (every unit, and scikit-learn's one-flip estimate) stay within a small multiple of
    # u · Σ_i Σ_j (|W_ji| + 1) of float64 on the same float32 numbers, whatever the biases.
    g = torch.Generator().manual_seed(seed + 30)
    n_visible, n_hidden = 16, 64
    p32 = RBMParams(torch.randn(n_hidden, n_visible, generator=g),
                    torch.randn(n_visible, generator=g),
                    torch.randn(n_hidden, generator=g) * bias_scale)
    p64 = RBMParams(*(t.to(F64) for t in p32))
    X = (torch.rand(200, n_visible, generator=g) < 0.5).float()
    idx = torch.randint(0, n_visible, (200,), generator=g)
    u = torch.finfo(torch.float32).eps / 2
    bound = 8 * u * float((p64.weights.abs() + 1).sum())
    for kwargs in ({}, {"indices": idx}):
        ours = pseudo_log_likelihood(p32, X, **kwargs).to(F64)
        exact = pseudo_log_likelihood(p64, X.to(F64), **kwargs)
        assert float((ours - exact).abs().max()) <= bound, kwargs


def test_float32_free_energy_log_partition_and_likelihood_are_bounded(seed: int) -> None:
    # Sums without a cancelling difference: float32 keeps each within a few u times the sum of
    # its terms' sizes (|v·b| + Σ_j softplus(a_j), and |log Z| for log p), large biases or not.
    g = torch.Generator().manual_seed(seed + 40)
    p32 = RBMParams(torch.randn(12, 40, generator=g) * 2.5, torch.randn(40, generator=g) * 10,
                    torch.randn(12, generator=g) * 10)
    p64 = RBMParams(*(t.to(F64) for t in p32))
    X = (torch.rand(300, 40, generator=g) < 0.5).float()
    X64 = X.to(F64)
    u = torch.finfo(torch.float32).eps / 2
    terms = ((X64 @ p64.visible_bias).abs()
             + torch.nn.functional.softplus(X64 @ p64.weights.T + p64.hidden_bias).sum(1))
    log_z = exact_log_partition(p64)
    assert bool(((free_energy(p32, X).to(F64) - free_energy(p64, X64)).abs()
                 <= 16 * u * terms).all())
    assert abs(float(exact_log_partition(p32)) - float(log_z)) <= 16 * u * abs(float(log_z))
    assert bool(((log_likelihood(p32, X).to(F64) - log_likelihood(p64, X64)).abs()
                 <= 16 * u * (terms + log_z.abs())).all())


# --------------------------------------------------------------------------- bad input


def test_errors() -> None:
    p = random_params(4, 3)
    with pytest.raises(ValueError, match=r"exact_log_partition: the smaller layer must have at "
                                         r"most 20 units"):
        exact_log_partition(random_params(21, 22))
    with pytest.raises(ValueError, match=r"ais_log_partition: n_runs must be an int >= 2"):
        ais_log_partition(p, n_runs=1)
    with pytest.raises(ValueError, match=r"ais_log_partition: give data or base_visible_bias"):
        ais_log_partition(p, data=torch.zeros(1, 4, dtype=F64), base_visible_bias=torch.zeros(4))
    with pytest.raises(ValueError, match=r"pseudo_log_likelihood: indices must be 2 ints"):
        pseudo_log_likelihood(p, torch.zeros(2, 4, dtype=F64), indices=torch.tensor([0, 4]))


def test_doctests() -> None:
    import doctest

    from toolkit.algorithms.rbm import likelihood as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
