"""Tests for toolkit.algorithms.rbm.core: free energy, conditionals and chains against brute-force
enumeration and Monte-Carlo averages; the block of cd_loss against the CD statistics in numpy and
finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rbm_testutil import F64, all_binary, numpy_cd_statistics, random_params

from toolkit import BlockNotSwitchableError, disable_blocks, has_gradient_path, record_blocks
from toolkit.algorithms.rbm import (
    BLOCK,
    RBMParams,
    cd_gradient,
    cd_loss,
    free_energy,
    gibbs_chain,
    init_params,
    log_likelihood,
    negative_samples,
    sample_hidden,
    sample_visible,
)

# ------------------------------------------------------------------------------ model math


def test_free_energy_matches_brute_force_marginal() -> None:
    p = random_params(4, 3)
    V, H = all_binary(4), all_binary(3)
    W, b, c = p
    neg_e = (V @ b)[:, None] + (H @ c)[None, :] + V @ W.T @ H.T
    expected = -torch.logsumexp(neg_e, dim=1)
    torch.testing.assert_close(free_energy(p, V), expected, rtol=0, atol=1e-12)


def test_sample_hidden_monte_carlo_matches_conditional(seed: int) -> None:
    p = random_params(6, 4, seed=seed + 4)
    v = all_binary(6)[torch.tensor([3, 40])]
    g = torch.Generator().manual_seed(seed)
    n = 20000
    prob, _ = sample_hidden(p, v, generator=g)
    expected = torch.sigmoid(v @ p.weights.T + p.hidden_bias)
    torch.testing.assert_close(prob, expected, rtol=0, atol=1e-14)
    samples = torch.stack([sample_hidden(p, v, generator=g)[1] for _ in range(n)])
    assert set(torch.unique(samples).tolist()) <= {0.0, 1.0}
    stderr = torch.sqrt(expected * (1 - expected) / n)
    assert bool(((samples.mean(0) - expected).abs() <= 5 * stderr + 1e-12).all())


def test_sample_visible_monte_carlo_matches_conditional(seed: int) -> None:
    p = random_params(5, 3, seed=seed + 5)
    h = torch.tensor([[1.0, 0.0, 1.0]], dtype=F64).expand(20000, 3)
    g = torch.Generator().manual_seed(seed + 1)
    prob, samples = sample_visible(p, h, generator=g)
    expected = torch.sigmoid(h[:1] @ p.weights + p.visible_bias)[0]
    stderr = torch.sqrt(expected * (1 - expected) / 20000)
    assert bool(((samples.mean(0) - expected).abs() <= 5 * stderr).all())
    torch.testing.assert_close(prob[0], expected)


def test_gibbs_chain_samples_the_model_distribution(seed: int) -> None:
    p = random_params(4, 3, scale=0.8, seed=seed + 6)
    g = torch.Generator().manual_seed(seed + 2)
    v0 = torch.zeros(20000, 4, dtype=F64)
    v = gibbs_chain(p, v0, 30, generator=g)
    codes = (v * torch.tensor([8.0, 4.0, 2.0, 1.0], dtype=F64)).sum(1).long()
    empirical = torch.bincount(codes, minlength=16).to(F64) / 20000
    exact = torch.exp(log_likelihood(p, all_binary(4)))  # itertools order = binary code order
    assert float((empirical - exact).abs().sum()) / 2 < 0.02  # total variation


def test_gibbs_chain_mean_field_is_deterministic_and_differentiable() -> None:
    p = random_params(4, 3, requires_grad=True)
    v = all_binary(4)[:5]
    a = gibbs_chain(p, v, 3, mean_field=True)
    b = gibbs_chain(p, v, 3, mean_field=True)
    assert torch.equal(a, b) and a.requires_grad
    assert bool(((a > 0) & (a < 1)).all())
    W, bv, c = p
    expected = v
    for _ in range(3):
        expected = torch.sigmoid(torch.sigmoid(expected @ W.T + c) @ W + bv)
    torch.testing.assert_close(a, expected)


# --------------------------------------------------------------------------- the block


@pytest.mark.parametrize("mean_field", [False, True])
def test_cd_loss_gradient_equals_cd_statistics(mean_field: bool, seed: int) -> None:
    p = random_params(6, 4, requires_grad=True)
    g = torch.Generator().manual_seed(seed)
    v_data = (torch.rand(7, 6, generator=g) < 0.5).to(F64)
    # the chain is built with gradient tracking on: only the block keeps it out of the gradient
    v_model = gibbs_chain(p, v_data[:5], 2, mean_field=mean_field, generator=g)
    with record_blocks() as names:
        loss = cd_loss(p, v_data, v_model)
    assert names == ["rbm.negative_samples"]
    grads = torch.autograd.grad(loss, list(p))
    for got, expected in zip(grads, numpy_cd_statistics(p, v_data, v_model)):
        np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-10)
    for got, expected in zip(grads, cd_gradient(p, v_data, v_model)):
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_cd_loss_without_block_differentiates_the_mean_field_chain(seed: int) -> None:
    p = random_params(5, 3, requires_grad=True, seed=seed + 7)
    v_data = all_binary(5)[torch.tensor([2, 9, 21, 30])]

    def loss_fn(params: RBMParams) -> torch.Tensor:
        return cd_loss(params, v_data, gibbs_chain(params, v_data, 2, mean_field=True))

    blocked = torch.autograd.grad(loss_fn(p), list(p))
    with disable_blocks("rbm.*"):
        unblocked_loss = loss_fn(p)
        unblocked = torch.autograd.grad(unblocked_loss, list(p))
    assert has_gradient_path(unblocked_loss, p.weights)
    # it is no longer the CD statistics ...
    flat_b = torch.cat([x.reshape(-1) for x in blocked])
    flat_u = torch.cat([x.reshape(-1) for x in unblocked])
    assert float((flat_b - flat_u).norm()) > 1e-3 * float(flat_b.norm())
    # ... but the total derivative of θ ↦ mean F_θ(v_data) − mean F_θ(chain_θ(v_data)):
    # central finite differences of that function agree with the unblocked gradient
    with disable_blocks("rbm.*"), torch.no_grad():
        for i, (tensor, grad) in enumerate(zip(p, unblocked)):
            flat = tensor.reshape(-1)
            for j in range(0, flat.numel(), 4):
                eps = 1e-6
                plus = [t.clone() for t in p]
                minus = [t.clone() for t in p]
                plus[i].reshape(-1)[j] += eps
                minus[i].reshape(-1)[j] -= eps
                fd = (loss_fn(RBMParams(*plus)) - loss_fn(RBMParams(*minus))) / (2 * eps)
                assert abs(float(fd) - float(grad.reshape(-1)[j])) < 1e-7


def test_sampled_chain_passes_no_gradient(seed: int) -> None:
    p = random_params(4, 3, requires_grad=True)
    v = gibbs_chain(p, all_binary(4)[:3], 2, generator=torch.Generator().manual_seed(seed))
    assert not v.requires_grad and not has_gradient_path(v, p.weights)
    assert set(torch.unique(v).tolist()) <= {0.0, 1.0}


def test_cd_loss_block_cuts_the_path_to_the_chain() -> None:
    p = random_params(4, 3, requires_grad=True)
    v = all_binary(4)[:3]
    v_model = gibbs_chain(p, v, 1, mean_field=True)
    assert has_gradient_path(v_model, p.weights)
    loss = cd_loss(p, v, v_model)
    assert not has_gradient_path(loss, v_model)


# --------------------------------------------------------------------------- bad input


def test_errors() -> None:
    p = random_params(4, 3)
    with pytest.raises(ValueError, match=r"gibbs_chain: k must be an int >= 1"):
        gibbs_chain(p, torch.zeros(1, 4, dtype=F64), 0)
    with pytest.raises(ValueError, match=r"free_energy: v must have shape \(n_samples, 4\)"):
        free_energy(p, torch.zeros(2, 5, dtype=F64))
    with pytest.raises(ValueError, match=r"cd_loss: v_model must have shape"):
        cd_loss(p, torch.zeros(2, 4, dtype=F64), torch.zeros(2, 3, dtype=F64))
    with pytest.raises(TypeError, match=r"free_energy: params must be an RBMParams"):
        free_energy("weights", torch.zeros(2, 4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"init_params: init must be one of 'normal', 'uniform', "
                                         r"got 'xavier'"):
        init_params(3, 2, init="xavier")
    with pytest.raises(ValueError, match=r"init_params: scale must be None or a number >= 0"):
        init_params(3, 2, scale=-1.0)
    with pytest.raises(TypeError, match=r"init_params: n_visible must be an int >= 1, got '3'"):
        init_params("3", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"init_params: visible_bias must have shape \(3,\)"):
        init_params(3, 2, visible_bias=[0.0, 1.0])


# ------------------------------------------------------------------- negative samples


@pytest.mark.parametrize("chain", ["sampled", "mean_field"])
def test_negative_samples_are_the_chain_cut_by_the_block(chain: str, seed: int) -> None:
    p = random_params(5, 3, requires_grad=True, seed=seed + 10)
    v = all_binary(5)[torch.tensor([1, 7, 22])]
    with record_blocks() as names:
        got = negative_samples(p, v, 2, chain=chain, generator=torch.Generator().manual_seed(seed + 3))
    assert names == [BLOCK]
    expected = gibbs_chain(p, v, 2, mean_field=chain == "mean_field",
                           generator=torch.Generator().manual_seed(seed + 3))
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    # no graph is recorded for the chain while the block is active
    assert not got.requires_grad and got.grad_fn is None


def test_negative_samples_without_the_block_keep_the_mean_field_chain(seed: int) -> None:
    p = random_params(5, 3, requires_grad=True, seed=seed + 11)
    v = all_binary(5)[torch.tensor([3, 12])]
    with disable_blocks(BLOCK):
        v_model = negative_samples(p, v, 3, chain="mean_field")
        loss = cd_loss(p, v, v_model)
    assert has_gradient_path(loss, p.weights) and has_gradient_path(v_model, p.hidden_bias)
    # the gradient is the total derivative of mean F(v) − mean F(chain(v)) through the three
    # chain steps (the plain chain records its graph like any torch code)
    chain = gibbs_chain(p, v, 3, mean_field=True)
    expected = torch.autograd.grad(free_energy(p, v).mean() - free_energy(p, chain).mean(),
                                   list(p))
    for got, want in zip(torch.autograd.grad(loss, list(p)), expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_negative_samples_from_hidden_states_begin_with_a_visible_draw(seed: int) -> None:
    # from hidden states h: v ~ p(v|h), then k − 1 full steps: the same draws as sampling
    # p(v|h) by hand and continuing with gibbs_chain
    p = random_params(5, 3, requires_grad=True, seed=seed + 12)
    h = all_binary(3)[torch.tensor([2, 5, 7])]
    got = negative_samples(p, h, 3, from_hidden=True, generator=torch.Generator().manual_seed(seed + 4))
    g = torch.Generator().manual_seed(seed + 4)
    _, v = sample_visible(p, h, generator=g)
    torch.testing.assert_close(got, gibbs_chain(p, v, 2, generator=g), rtol=0, atol=0)
    assert not got.requires_grad
    mf = negative_samples(p, h, 1, chain="mean_field", from_hidden=True)
    torch.testing.assert_close(mf, torch.sigmoid(h @ p.weights + p.visible_bias).detach())
    with pytest.raises(ValueError, match=r"negative_samples: start must have shape \(n_samples, 3\)"):
        negative_samples(p, all_binary(5)[:2], 1, from_hidden=True)


def test_negative_samples_refuse_a_sampled_chain_without_the_block() -> None:
    p = random_params(4, 3, requires_grad=True)
    with disable_blocks("rbm.*"), pytest.raises(
            BlockNotSwitchableError,
            match=r"negative_samples: the block 'rbm.negative_samples' cannot be switched off "
                  r"here \(a sampled Gibbs chain passes no gradient.*chain='mean_field'"):
        negative_samples(p, all_binary(4)[:2], 1, chain="sampled")
    with pytest.raises(ValueError, match=r"negative_samples: chain must be one of 'sampled', "
                                         r"'mean_field', got 'gaussian'"):
        negative_samples(p, all_binary(4)[:2], 1, chain="gaussian")
    with pytest.raises(ValueError, match=r"negative_samples: start must have shape"):
        negative_samples(p, all_binary(3)[:2], 1)


def test_doctests() -> None:
    import doctest

    from toolkit.algorithms.rbm import core as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
