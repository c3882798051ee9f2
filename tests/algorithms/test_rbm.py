"""Tests for toolkit.algorithms.rbm against brute-force enumeration, closed forms,
finite differences, Monte-Carlo averages and scikit-learn's BernoulliRBM."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from toolkit import disable_blocks, has_gradient_path, record_blocks
from toolkit.algorithms.rbm import (
    BernoulliRBM,
    RBMParams,
    ais_log_partition,
    cd_gradient,
    cd_loss,
    exact_log_likelihood_gradient,
    exact_log_partition,
    free_energy,
    gibbs_chain,
    init_params,
    log_likelihood,
    pseudo_log_likelihood,
    sample_hidden,
    sample_visible,
)
from toolkit.data import bars_and_stripes, binarized_digits

F64 = torch.float64


def random_params(n_visible: int, n_hidden: int, scale: float = 1.0, seed: int = 0,
                  requires_grad: bool = False) -> RBMParams:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(n_hidden, n_visible, generator=g, dtype=F64) * scale
    b = torch.randn(n_visible, generator=g, dtype=F64) * scale
    c = torch.randn(n_hidden, generator=g, dtype=F64) * scale
    return RBMParams(*(t.requires_grad_(requires_grad) for t in (W, b, c)))


def all_binary(n: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)), dtype=F64)


def brute_force_log_z(p: RBMParams) -> float:
    """log Σ_{v,h} exp(v·b + h·c + hᵀWv), every joint state listed explicitly (numpy)."""
    W, b, c = (t.detach().numpy() for t in p)
    V, H = all_binary(W.shape[1]).numpy(), all_binary(W.shape[0]).numpy()
    neg_energy = (V @ b)[:, None] + (H @ c)[None, :] + V @ W.T @ H.T  # (2^V, 2^H)
    m = neg_energy.max()
    return float(m + np.log(np.exp(neg_energy - m).sum()))


# ------------------------------------------------------------------------------------ data


def test_bars_and_stripes_patterns() -> None:
    X = bars_and_stripes(4)
    assert X.shape == (30, 16)
    assert torch.unique(X, dim=0).shape[0] == 30
    X32 = bars_and_stripes(4, duplicate_constant=True)
    assert X32.shape == (32, 16)
    assert torch.unique(X32, dim=0).shape[0] == 30
    # all-0 and all-1 appear twice each in the Shark variant
    assert int((X32.sum(1) == 0).sum()) == 2 and int((X32.sum(1) == 16).sum()) == 2
    for row in X32.reshape(-1, 4, 4):
        is_bar = bool((row == row[:, :1]).all())  # each row constant
        is_stripe = bool((row == row[:1, :]).all())  # each column constant
        assert is_bar or is_stripe


def test_binarized_digits_is_binary() -> None:
    X, y = binarized_digits()
    assert X.shape == (1797, 64) and y.shape == (1797,)
    assert set(torch.unique(X).tolist()) == {0.0, 1.0}


# ------------------------------------------------------------------------------ model math


def test_free_energy_matches_brute_force_marginal() -> None:
    p = random_params(4, 3)
    V, H = all_binary(4), all_binary(3)
    W, b, c = p
    neg_e = (V @ b)[:, None] + (H @ c)[None, :] + V @ W.T @ H.T
    expected = -torch.logsumexp(neg_e, dim=1)
    torch.testing.assert_close(free_energy(p, V), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_exact_log_partition_matches_brute_force(shape: tuple[int, int]) -> None:
    n_visible, n_hidden = shape
    p = random_params(n_visible, n_hidden, seed=1)
    expected = brute_force_log_z(p)
    assert abs(float(exact_log_partition(p)) - expected) < 1e-10
    # chunked enumeration gives the same number
    assert abs(float(exact_log_partition(p, chunk_elements=7)) - expected) < 1e-10


def test_log_likelihood_normalises() -> None:
    p = random_params(6, 4, seed=2)
    total = torch.logsumexp(log_likelihood(p, all_binary(6)), dim=0)
    assert abs(float(total)) < 1e-10


def test_exact_log_likelihood_gradient_matches_enumerated_statistics() -> None:
    p = random_params(5, 3, scale=0.7, seed=3)
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


def test_sample_hidden_monte_carlo_matches_conditional() -> None:
    p = random_params(6, 4, seed=4)
    v = all_binary(6)[torch.tensor([3, 40])]
    g = torch.Generator().manual_seed(0)
    n = 20000
    prob, _ = sample_hidden(p, v, generator=g)
    expected = torch.sigmoid(v @ p.weights.T + p.hidden_bias)
    torch.testing.assert_close(prob, expected, rtol=0, atol=1e-14)
    samples = torch.stack([sample_hidden(p, v, generator=g)[1] for _ in range(n)])
    assert set(torch.unique(samples).tolist()) <= {0.0, 1.0}
    stderr = torch.sqrt(expected * (1 - expected) / n)
    assert bool(((samples.mean(0) - expected).abs() <= 5 * stderr + 1e-12).all())


def test_sample_visible_monte_carlo_matches_conditional() -> None:
    p = random_params(5, 3, seed=5)
    h = torch.tensor([[1.0, 0.0, 1.0]], dtype=F64).expand(20000, 3)
    g = torch.Generator().manual_seed(1)
    prob, samples = sample_visible(p, h, generator=g)
    expected = torch.sigmoid(h[:1] @ p.weights + p.visible_bias)[0]
    stderr = torch.sqrt(expected * (1 - expected) / 20000)
    assert bool(((samples.mean(0) - expected).abs() <= 5 * stderr).all())
    torch.testing.assert_close(prob[0], expected)


def test_gibbs_chain_samples_the_model_distribution() -> None:
    p = random_params(4, 3, scale=0.8, seed=6)
    g = torch.Generator().manual_seed(2)
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


def numpy_cd_statistics(p: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor
                        ) -> list[np.ndarray]:
    """Negated CD update −(⟨p(h|v) vᵀ⟩_data − ⟨p(h|v) vᵀ⟩_model), written out in numpy."""
    W, _, c = (t.detach().numpy() for t in p)
    vd, vm = v_data.detach().numpy(), v_model.detach().numpy()
    hd = 1 / (1 + np.exp(-(vd @ W.T + c)))
    hm = 1 / (1 + np.exp(-(vm @ W.T + c)))
    dW = -(hd.T @ vd / len(vd) - hm.T @ vm / len(vm))
    db = -(vd.mean(0) - vm.mean(0))
    dc = -(hd.mean(0) - hm.mean(0))
    return [dW, db, dc]


@pytest.mark.parametrize("mean_field", [False, True])
def test_cd_loss_gradient_equals_cd_statistics(mean_field: bool) -> None:
    p = random_params(6, 4, requires_grad=True)
    g = torch.Generator().manual_seed(0)
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


def test_cd_loss_without_block_differentiates_the_mean_field_chain() -> None:
    p = random_params(5, 3, requires_grad=True, seed=7)
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


def test_sampled_chain_passes_no_gradient() -> None:
    p = random_params(4, 3, requires_grad=True)
    v = gibbs_chain(p, all_binary(4)[:3], 2, generator=torch.Generator().manual_seed(0))
    assert not v.requires_grad and not has_gradient_path(v, p.weights)
    assert set(torch.unique(v).tolist()) <= {0.0, 1.0}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_estimator_on_cuda_matches_the_cpu_formulas() -> None:
    X = bars_and_stripes(3, dtype=F64)
    rbm = BernoulliRBM(4, epochs=3, random_state=0, device="cuda", dtype=F64).fit(X)
    assert rbm.weights_.device.type == "cuda"
    p_cpu = RBMParams(*(t.cpu() for t in (rbm.weights_, rbm.visible_bias_, rbm.hidden_bias_)))
    torch.testing.assert_close(rbm.log_likelihood(X).cpu(), log_likelihood(p_cpu, X))
    assert rbm.sample(4, n_steps=5).device.type == "cuda"
    assert rbm.score_samples(X).shape == (len(X),)
    rbm.log_likelihood(X, method="ais", n_runs=10, betas=50)


def test_cd_loss_block_cuts_the_path_to_the_chain() -> None:
    p = random_params(4, 3, requires_grad=True)
    v = all_binary(4)[:3]
    v_model = gibbs_chain(p, v, 1, mean_field=True)
    assert has_gradient_path(v_model, p.weights)
    loss = cd_loss(p, v, v_model)
    assert not has_gradient_path(loss, v_model)


# ---------------------------------------------------------------------- AIS and pseudo-LL


@pytest.mark.slow
def test_ais_within_a_tenth_of_a_nat_of_exact_on_a_trained_64x16_model() -> None:
    X = binarized_digits(dtype=F64).X
    rbm = BernoulliRBM(16, learning_rate=0.05, batch_size=20, epochs=4, random_state=0,
                       dtype=F64).fit(X)
    p = RBMParams(rbm.weights_, rbm.visible_bias_, rbm.hidden_bias_)
    exact = float(exact_log_partition(p))
    result = ais_log_partition(p, data=X, n_runs=100, betas=3000,
                               generator=torch.Generator().manual_seed(0))
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


def sklearn_rbm(p: RBMParams, n_visible: int, seed: int):
    from sklearn.neural_network import BernoulliRBM as SkRBM

    sk = SkRBM(n_components=p.weights.shape[0], random_state=seed)
    sk.fit(np.zeros((2, n_visible)))  # creates the attributes; replaced below
    sk.components_ = p.weights.numpy().copy()
    sk.intercept_visible_ = p.visible_bias.numpy().copy()
    sk.intercept_hidden_ = p.hidden_bias.numpy().copy()
    return sk


def test_pseudo_log_likelihood_matches_scikit_learn_with_the_same_flips() -> None:
    p = random_params(12, 5, seed=8)
    X = (torch.rand(40, 12, generator=torch.Generator().manual_seed(0)) < 0.4).to(F64)
    seed = 3
    sk = sklearn_rbm(p, 12, seed)
    # scikit-learn draws the flipped unit of each row as RandomState(seed).randint(0, V, n)
    idx = np.random.RandomState(seed).randint(0, 12, 40)
    ours = pseudo_log_likelihood(p, X, indices=torch.as_tensor(idx))
    np.testing.assert_allclose(ours.numpy(), sk.score_samples(X.numpy()), rtol=1e-12, atol=1e-12)


def test_pseudo_log_likelihood_is_unbiased_for_the_sum_of_conditionals() -> None:
    p = random_params(8, 4, seed=9)
    X = all_binary(8)[torch.tensor([5, 77, 200])]
    # Σ_i log P(v_i | v_-i), with every unit flipped in turn
    exact = torch.zeros(3, dtype=F64)
    for i in range(8):
        flipped = X.clone()
        flipped[:, i] = 1 - flipped[:, i]
        exact += torch.nn.functional.logsigmoid(free_energy(p, flipped) - free_energy(p, X))
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([pseudo_log_likelihood(p, X, generator=g) for _ in range(4000)])
    stderr = draws.std(0) / math.sqrt(4000)
    assert bool(((draws.mean(0) - exact).abs() < 5 * stderr).all())


# -------------------------------------------------------------------------- the estimator


def test_estimator_update_is_sgd_on_the_autograd_cd_gradient() -> None:
    X = bars_and_stripes(3, dtype=F64)
    rbm = BernoulliRBM(4, learning_rate=0.1, batch_size=len(X), epochs=1, momentum=0.5,
                       weight_decay=0.01, k=2, random_state=0, dtype=F64).fit(X)
    before = [t.clone() for t in (rbm.weights_, rbm.visible_bias_, rbm.hidden_bias_)]
    velocity = [t.clone() for t in rbm._velocity]
    replay = torch.Generator().set_state(rbm._generator.get_state())
    p = RBMParams(*before)
    v_model = gibbs_chain(p, X, 2, generator=replay)
    grads = list(numpy_cd_statistics(p, X, v_model))
    grads[0] = grads[0] + 0.01 * before[0].numpy()
    rbm.partial_fit(X)
    after = (rbm.weights_, rbm.visible_bias_, rbm.hidden_bias_)
    for t0, u, g, t1 in zip(before, velocity, grads, after):
        expected = t0.numpy() + 0.5 * u.numpy() - 0.1 * g
        np.testing.assert_allclose(t1.numpy(), expected, rtol=0, atol=1e-12)
    assert not rbm.weights_.requires_grad


@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_estimator_learns_bars_and_stripes(method: str) -> None:
    X = bars_and_stripes(3, duplicate_constant=True)
    rbm = BernoulliRBM(6, method=method, learning_rate=0.3, batch_size=8, epochs=300,
                       n_chains=10, init="uniform", random_state=0)
    start = BernoulliRBM(6, epochs=0, init="uniform", random_state=0).fit(X)
    rbm.fit(X)
    assert float(rbm.log_likelihood(X).mean()) > float(start.log_likelihood(X).mean()) + 1.0
    assert rbm.weights_.shape == (6, 9) and rbm.hidden_bias_.shape == (6,)
    assert rbm.n_iter_ == 300 and rbm.n_updates_ == 300 * 2
    if method == "pcd":
        assert rbm.persistent_chain_.shape == (10, 9)
    else:
        assert not hasattr(rbm, "persistent_chain_")
    h = rbm.transform(X.numpy())
    assert h.shape == (len(X), 6) and bool(((h > 0) & (h < 1)).all())
    s = rbm.sample(5, n_steps=20)
    assert s.shape == (5, 9) and set(torch.unique(s).tolist()) <= {0.0, 1.0}


def test_estimator_is_deterministic_for_a_seed() -> None:
    X = bars_and_stripes(3)
    a = BernoulliRBM(4, method="pcd", epochs=3, random_state=5).fit(X)
    b = BernoulliRBM(4, method="pcd", epochs=3, random_state=5).fit(X)
    assert torch.equal(a.weights_, b.weights_)
    assert torch.equal(a.score_samples(X), b.score_samples(X))
    assert torch.equal(a.score_samples(X), a.score_samples(X))  # like scikit-learn


def test_estimator_log_likelihood_ais_agrees_with_exact() -> None:
    X = bars_and_stripes(3, dtype=F64)
    rbm = BernoulliRBM(5, learning_rate=0.1, batch_size=4, epochs=30, random_state=0,
                       dtype=F64).fit(X)
    exact = rbm.log_likelihood(X)
    assert rbm.log_partition_stderr_ == 0.0
    ais = rbm.log_likelihood(X, method="ais", n_runs=50, betas=1000)
    assert abs(float(ais.mean() - exact.mean())) < 0.1
    assert rbm.log_partition_stderr_ > 0


def test_estimator_weights_have_scikit_learn_layout() -> None:
    X = bars_and_stripes(3, dtype=F64)
    rbm = BernoulliRBM(4, epochs=2, random_state=0, dtype=F64).fit(X)
    sk = sklearn_rbm(RBMParams(rbm.weights_, rbm.visible_bias_, rbm.hidden_bias_), 9, 0)
    np.testing.assert_allclose(rbm.transform(X).numpy(), sk.transform(X.numpy()), atol=1e-12)


# --------------------------------------------------------------------------- bad input


def test_errors() -> None:
    X = bars_and_stripes(3)
    with pytest.raises(ValueError, match=r"BernoulliRBM.fit: X must be binary"):
        BernoulliRBM(3).fit(X * 0.5)
    with pytest.raises(ValueError, match=r"BernoulliRBM: k must be an int >= 1.*got 0"):
        BernoulliRBM(3, k=0).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM: method must be 'cd' or 'pcd'"):
        BernoulliRBM(3, method="sml").fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM: learning_rate must be > 0"):
        BernoulliRBM(3, learning_rate=-1.0).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM: momentum must be in \[0, 1\)"):
        BernoulliRBM(3, momentum=1.0).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM: batch_size must be a positive int"):
        BernoulliRBM(3, batch_size=0).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM: init must be 'normal' or 'uniform'"):
        BernoulliRBM(3, init="zeros").fit(X)
    with pytest.raises(TypeError, match=r"BernoulliRBM: random_state must be an int or None"):
        BernoulliRBM(3, random_state=1.5).fit(X)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"BernoulliRBM: dtype must be a floating torch.dtype"):
        BernoulliRBM(3, dtype=torch.int64).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM: epochs must be an int >= 0"):
        BernoulliRBM(3, epochs=-1).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM.sample: n_steps must be an int >= 1"):
        BernoulliRBM(3, epochs=1).fit(X).sample(2, n_steps=0)
    with pytest.raises(ValueError, match=r"BernoulliRBM.fit: X must be a non-empty 2-D array"):
        BernoulliRBM(3).fit(X[0])
    with pytest.raises(RuntimeError, match=r"BernoulliRBM.transform: this model is not fitted"):
        BernoulliRBM(3).transform(X)
    rbm = BernoulliRBM(3, epochs=1, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"BernoulliRBM.transform: X has 4 features, but the "
                                         r"model was fitted with 9"):
        rbm.transform(torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"BernoulliRBM.transform: X must have values in \[0, 1\]"):
        rbm.transform(X * 2)
    with pytest.raises(ValueError, match=r"BernoulliRBM.score_samples: X must be binary"):
        rbm.score_samples(X * 0.5)
    with pytest.raises(ValueError, match=r"BernoulliRBM.log_likelihood: method must be"):
        rbm.log_likelihood(X, method="mc")
    with pytest.raises(ValueError, match=r"BernoulliRBM.partial_fit: X has 2 features"):
        rbm.partial_fit(torch.zeros(2, 2))
    p = random_params(4, 3)
    with pytest.raises(ValueError, match=r"gibbs_chain: k must be an int >= 1"):
        gibbs_chain(p, torch.zeros(1, 4, dtype=F64), 0)
    with pytest.raises(ValueError, match=r"free_energy: v must have shape \(n_samples, 4\)"):
        free_energy(p, torch.zeros(2, 5, dtype=F64))
    with pytest.raises(ValueError, match=r"cd_loss: v_model must have shape"):
        cd_loss(p, torch.zeros(2, 4, dtype=F64), torch.zeros(2, 3, dtype=F64))
    with pytest.raises(TypeError, match=r"free_energy: params must be an RBMParams"):
        free_energy("weights", torch.zeros(2, 4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"exact_log_partition: the smaller layer must have at "
                                         r"most 20 units"):
        exact_log_partition(random_params(21, 22))
    with pytest.raises(ValueError, match=r"ais_log_partition: n_runs must be an int >= 2"):
        ais_log_partition(p, n_runs=1)
    with pytest.raises(ValueError, match=r"ais_log_partition: give data or base_visible_bias"):
        ais_log_partition(p, data=torch.zeros(1, 4, dtype=F64), base_visible_bias=torch.zeros(4))
    with pytest.raises(ValueError, match=r"pseudo_log_likelihood: indices must be 2 ints"):
        pseudo_log_likelihood(p, torch.zeros(2, 4, dtype=F64), indices=torch.tensor([0, 4]))
    with pytest.raises(ValueError, match=r"init_params: init must be 'normal' or 'uniform'"):
        init_params(3, 2, init="xavier")


# ---------------------------------------------------------------------- acceptance (slow)

BAS_OPTIMUM_NLL = 108.13  # −Σ log p of the 32 patterns under the best distribution on them


@pytest.mark.slow
def test_bars_and_stripes_cd1_reaches_summed_nll_below_200() -> None:
    # Shark's setting: 32 patterns, 16 visible, 8 hidden, CD-1, lr 0.05, full batch, 8001
    # updates, weights U(−0.1, 0.1), biases 0
    X = bars_and_stripes(4, duplicate_constant=True, dtype=F64)
    rbm = BernoulliRBM(8, method="cd", k=1, learning_rate=0.05, batch_size=32, epochs=8001,
                       init="uniform", random_state=0, dtype=F64).fit(X)
    nll = -float(rbm.log_likelihood(X).sum())
    assert rbm.n_updates_ == 8001
    assert BAS_OPTIMUM_NLL < nll < 200


@pytest.mark.slow
def test_bars_and_stripes_pcd_reaches_summed_nll_below_200() -> None:
    # 32 persistent chains, batch 16, 5001 updates
    X = bars_and_stripes(4, duplicate_constant=True, dtype=F64)
    rbm = BernoulliRBM(8, method="pcd", k=1, learning_rate=0.05, batch_size=16, epochs=2500,
                       n_chains=32, init="uniform", random_state=0, dtype=F64).fit(X)
    rbm.partial_fit(X[torch.randperm(32, generator=torch.Generator().manual_seed(0))[:16]])
    nll = -float(rbm.log_likelihood(X).sum())
    assert rbm.n_updates_ == 5001 and rbm.persistent_chain_.shape == (32, 16)
    assert BAS_OPTIMUM_NLL < nll < 200


@pytest.mark.slow
def test_digits_cd1_log_likelihood_at_least_scikit_learns() -> None:
    # 16 hidden, lr 0.05, batch 10, 20 epochs: exact mean log-likelihoods of both
    from sklearn.neural_network import BernoulliRBM as SkRBM

    X = binarized_digits(dtype=F64).X
    sk = SkRBM(16, learning_rate=0.05, batch_size=10, n_iter=20, random_state=0).fit(X.numpy())
    sk_params = RBMParams(*(torch.as_tensor(a) for a in
                            (sk.components_, sk.intercept_visible_, sk.intercept_hidden_)))
    sk_ll = float(log_likelihood(sk_params, X).mean())
    ours = BernoulliRBM(16, method="cd", learning_rate=0.05, batch_size=10, epochs=20,
                        random_state=0, dtype=F64).fit(X)
    assert float(ours.log_likelihood(X).mean()) >= sk_ll
