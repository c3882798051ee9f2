"""Tests for toolkit.algorithms.rbm.training: the update against the CD statistics in numpy, the
block (CD update with it, gradient through a mean-field chain without it, an error for a sampled
chain), the callback, persistent chains and bad input."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
import torch
from rbm_testutil import F64, numpy_cd_statistics

from toolkit import BlockNotSwitchableError, disable_blocks, record_blocks
from toolkit.algorithms.rbm import (
    BLOCK,
    BernoulliRBM,
    CDStep,
    DataRangeWarning,
    RBMParams,
    TrainState,
    cd_gradient,
    cd_loss,
    core,
    free_energy,
    gibbs_chain,
    init_params,
    negative_samples,
    train_cd,
    training,
)
from toolkit.lab.data import bars_and_stripes


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def cosine(a, b) -> float:
    a, b = flat(a), flat(b)
    return float(a @ b / (a.norm() * b.norm()))


def fresh(seed: int = 0, n_visible: int = 9, n_hidden: int = 4, layout: str = "row",
          dtype: torch.dtype = F64) -> RBMParams:
    p = init_params(n_visible, n_hidden, init="uniform", scale=0.5, dtype=dtype,
                    generator=torch.Generator().manual_seed(seed))
    if layout == "column":  # the estimator's layout: the same values, stored column by column
        W = core.column_major(p.weights.detach()).requires_grad_()
        assert core.is_column_major(W) and torch.equal(W, p.weights)
        p = p._replace(weights=W)
    return p


def record(steps: list[CDStep]):
    def callback(step: CDStep) -> None:
        steps.append(step._replace(params=RBMParams(*(t.clone() for t in step.params))))
    return callback


@pytest.mark.parametrize("layout", ["row", "column"])
@pytest.mark.parametrize("method", ["cd", "pcd"])
def test_each_update_is_sgd_on_the_cd_statistics(method: str, layout: str, seed: int) -> None:
    X = bars_and_stripes(3, dtype=F64)
    p = fresh(layout=layout)
    steps: list[CDStep] = []
    state = train_cd(p, X, method=method, k=2, learning_rate=0.1, batch_size=5, epochs=2,
                     momentum=0.5, weight_decay=0.01, n_chains=3, callback=record(steps),
                     generator=torch.Generator().manual_seed(seed))
    assert state.n_updates == len(steps) == 2 * 3 and state.n_epochs == 2
    assert [(s.epoch, s.batch) for s in steps] == [(e, b) for e in range(2) for b in range(3)]
    velocity = [torch.zeros_like(t) for t in p]
    for i, step in enumerate(steps):
        # autograd of cd_loss = the CD statistics written out in numpy (the block cuts the chain)
        expected = numpy_cd_statistics(step.params, step.v_data, step.v_model)
        for got, want in zip(step.grads, expected):
            np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-10)
        # SGD with momentum and weight decay on the weights
        g = list(step.grads)
        g[0] = g[0] + 0.01 * step.params.weights
        velocity = [0.5 * u - 0.1 * gi for u, gi in zip(velocity, g)]
        after = steps[i + 1].params if i + 1 < len(steps) else p
        for t0, u, t1 in zip(step.params, velocity, after):
            torch.testing.assert_close(t1, t0 + u, rtol=0, atol=1e-12)
        if method == "pcd" and i > 0:
            assert step.v_model.shape == (3, 9)
    if method == "pcd":  # hidden states, binary, as scikit-learn's h_samples_
        assert state.persistent_chain.shape == (3, 4)
        assert set(state.persistent_chain.unique().tolist()) <= {0.0, 1.0}
    else:
        assert state.persistent_chain is None
    assert all(t.requires_grad for t in p)  # flags restored (init_params makes them True)
    assert core.is_column_major(p.weights) == (layout == "column")  # trained in place


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_column_major_weights_train_like_row_major_ones(dtype: torch.dtype, seed: int) -> None:
    # the layout is a matter of speed only: the same fit, whatever order the entries are stored
    # in (a deterministic mean-field chain, so that rounding cannot flip a sample; momentum,
    # weight decay and, in float32, the compensated sum all go through the flat work space)
    X = bars_and_stripes(4, dtype=dtype)
    fits = {}
    for layout in ("row", "column"):
        p = fresh(seed, n_visible=16, n_hidden=5, layout=layout, dtype=dtype)
        state = train_cd(p, X, method="pcd", chain="mean_field", learning_rate=0.2,
                         batch_size=6, epochs=3, momentum=0.5, weight_decay=0.01, n_chains=4,
                         generator=torch.Generator().manual_seed(seed))
        fits[layout] = (p, state)
    (row, row_state), (col, col_state) = fits["row"], fits["column"]
    assert core.is_column_major(col.weights) and row.weights.is_contiguous()
    # the work space follows each layout (its copies are then plain copies)
    assert col_state._flat.transposed and not row_state._flat.transposed
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for a, b in zip(row, col):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    for a, b in zip(row_state.velocity, col_state.velocity):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    assert not torch.equal(row.weights, fresh(seed, 16, 5, dtype=dtype).weights)  # it trained


def test_a_state_continues_when_the_weights_change_layout(seed: int) -> None:
    # a caller may hand the same state weights in another order (an estimator's components_
    # assigned by hand): the work space is remade, the training goes on as one run
    X = bars_and_stripes(3, dtype=F64)
    kwargs = dict(method="pcd", chain="mean_field", batch_size=4, momentum=0.9, n_chains=3)
    one = fresh(3)
    train_cd(one, X, epochs=2, generator=torch.Generator().manual_seed(seed), **kwargs)
    two, g = fresh(3, layout="column"), torch.Generator().manual_seed(seed)
    state = train_cd(two, X, epochs=1, generator=g, **kwargs)
    two = two._replace(weights=two.weights.detach().contiguous().requires_grad_())
    train_cd(two, X, epochs=1, generator=g, state=state, **kwargs)
    for a, b in zip(one, two):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_persistent_chains_keep_hidden_states_as_scikit_learn_does(seed: int) -> None:
    # mean-field chains are deterministic: the kept state is p(h | v_model) under the
    # parameters before the update, and the next negative samples are p(v | h) under the new ones
    X = bars_and_stripes(3, dtype=F64)
    p = fresh()
    steps: list[CDStep] = []
    state = train_cd(p, X, method="pcd", chain="mean_field", k=1, batch_size=7, epochs=1,
                     n_chains=2, callback=record(steps), generator=torch.Generator().manual_seed(seed))
    first = steps[0]
    # deterministic chains started alike would stay alike: they start at random binary h
    # (uniforms drawn in float32 for every model dtype)
    h0 = (torch.rand(2, 4, generator=torch.Generator().manual_seed(seed)) < 0.5)
    torch.testing.assert_close(first.v_model, torch.sigmoid(
        h0.to(F64) @ first.params.weights + first.params.visible_bias))
    # two starts of 4 binary units coincide with probability 1/16 (TOOLKIT_TEST_SEED=8): the
    # chains differ exactly when their starts do
    assert torch.equal(first.v_model[0], first.v_model[1]) == torch.equal(h0[0], h0[1])
    for before, after in itertools.pairwise(steps):
        h = torch.sigmoid(before.v_model @ before.params.weights.T + before.params.hidden_bias)
        v = torch.sigmoid(h @ after.params.weights + after.params.visible_bias)
        torch.testing.assert_close(after.v_model, v, rtol=0, atol=1e-12)
    last = steps[-1]
    torch.testing.assert_close(state.persistent_chain, torch.sigmoid(
        last.v_model @ last.params.weights.T + last.params.hidden_bias), rtol=0, atol=1e-12)


def test_the_block_decides_what_a_mean_field_chain_contributes() -> None:
    # With the block the gradient is the CD update at the chain's output (cosine 1). Without it
    # the gradient is the total derivative of mean F(v_data) − mean F(chain_θ(v_data)): the CD
    # update plus the path through the k chain steps, a different direction (cosine < 1).
    X = bars_and_stripes(3, dtype=F64)
    cos_cd, weights = {}, {}
    for variant in ("blocked", "unblocked"):
        p = fresh(1)
        steps: list[CDStep] = []
        # (the blocked run is made under no_grad: training takes its gradient all the same)
        with record_blocks() as names, (disable_blocks(BLOCK) if variant == "unblocked"
                                        else torch.no_grad()):
            train_cd(p, X, chain="mean_field", k=3, learning_rate=0.5, batch_size=len(X),
                     epochs=20, callback=record(steps), shuffle=False)
        assert names == [BLOCK]
        first = steps[0]
        if variant == "unblocked":
            chain = gibbs_chain(first.params, X, 3, mean_field=True)
            ref = torch.autograd.grad(free_energy(first.params, X).mean()
                                      - free_energy(first.params, chain).mean(),
                                      list(first.params))
            for got, want in zip(first.grads, ref):
                torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        cos_cd[variant] = [cosine(s.grads, cd_gradient(s.params, s.v_data, s.v_model))
                           for s in steps]
        weights[variant] = p.weights.clone()
    assert min(cos_cd["blocked"]) == pytest.approx(1.0, abs=1e-12)
    assert max(cos_cd["unblocked"]) < 0.999
    with torch.no_grad():
        assert float((weights["blocked"] - weights["unblocked"]).abs().max()) > 1e-3


def test_a_sampled_chain_refuses_to_run_without_the_block() -> None:
    X = bars_and_stripes(3, dtype=F64)
    p = fresh()
    before = [t.clone() for t in p]
    with disable_blocks("rbm.*"), pytest.raises(
            BlockNotSwitchableError,
            match=r"train_cd: the block 'rbm.negative_samples' cannot be switched off here "
                  r"\(a sampled Gibbs chain passes no gradient.*use chain='mean_field'"):
        train_cd(p, X, chain="sampled")
    assert all(torch.equal(a, b) for a, b in zip(before, p))
    assert all(t.requires_grad for t in p)


def test_callback_stops_training_before_the_update() -> None:
    X = bars_and_stripes(3, dtype=F64)
    p = fresh()
    calls: list[int] = []

    def stop_at_third(step: CDStep) -> bool:
        calls.append(step.batch)
        return len(calls) == 3

    state = train_cd(p, X, batch_size=2, epochs=5, callback=stop_at_third)
    assert state.stopped and state.n_updates == 2 and state.n_epochs == 0 and len(calls) == 3


def test_a_state_continues_training_like_one_longer_run(seed: int) -> None:
    X = bars_and_stripes(3, dtype=F64)
    one, two = fresh(2), fresh(2)
    g1, g2 = torch.Generator().manual_seed(seed + 5), torch.Generator().manual_seed(seed + 5)
    kwargs = dict(method="pcd", batch_size=4, momentum=0.9, n_chains=6)
    train_cd(one, X, epochs=4, generator=g1, **kwargs)
    state = train_cd(two, X, epochs=1, generator=g2, **kwargs)
    state = train_cd(two, X, epochs=3, generator=g2, state=state, **kwargs)
    assert isinstance(state, TrainState) and state.n_epochs == 4 and state.n_updates == 4 * 4  # 14 patterns, batches of 4
    for a, b in zip(one, two):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_train_cd_works_under_no_grad() -> None:
    X = bars_and_stripes(3, dtype=F64)
    p = fresh()
    before = p.weights.clone()
    with torch.no_grad():
        train_cd(p, X, epochs=2)
    assert not torch.equal(before, p.weights)


def test_errors() -> None:
    X = bars_and_stripes(3, dtype=F64)
    p = fresh()
    with pytest.raises(ValueError, match=r"train_cd: chain must be one of 'sampled', "
                                         r"'mean_field', got 'gibbs'"):
        train_cd(p, X, chain="gibbs")
    with pytest.raises(ValueError, match=r"train_cd: k must be an int >= 1, got 0"):
        train_cd(p, X, k=0)
    with pytest.raises(TypeError, match=r"train_cd: callback must be None or a callable"):
        train_cd(p, X, callback="print")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"train_cd: X must have shape \(n_samples, 9\)"):
        train_cd(p, X[:, :4])
    # values outside [0, 1] train as given, with one warning (issue 55); NaN is refused
    with pytest.warns(DataRangeWarning, match=r"train_cd: X has values outside \[0, 1\] \(got "
                                              r"values in \[0, 2\]\)"):
        train_cd(fresh(), X * 2)
    with pytest.raises(ValueError, match=r"train_cd: X contains NaN or infinity"):
        train_cd(p, torch.where(X > 0, X, float("nan")))
    with pytest.raises(ValueError, match=r"train_cd: X must have at least one sample, got 0"):
        train_cd(p, X[:0])
    with pytest.raises(ValueError, match=r"train_cd: params.weights must be a floating leaf"):
        train_cd(RBMParams(p.weights * 1, p.visible_bias, p.hidden_bias), X)
    with pytest.raises(ValueError, match=r"train_cd: state was made for method='cd', "
                                         r"got 'pcd'"):
        train_cd(p, X, method="pcd", state=train_cd(p, X, epochs=0))
    with pytest.raises(TypeError, match=r"train_cd: state must be a TrainState or None"):
        train_cd(p, X, state={"velocity": []})  # type: ignore[arg-type]


def test_doctests() -> None:
    import doctest

    from toolkit.algorithms.rbm import training as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("chain", ["sampled", "mean_field"])
@pytest.mark.parametrize("from_hidden", [False, True])
def test_the_update_is_the_free_energy_gradient(chain: str, from_hidden: bool, seed: int) -> None:
    """The update differentiates a surrogate without the softplus (sg(σ(a))·a for softplus(a)):
    its gradient equals autograd of cd_loss to 1e-12 in float64, with the block and, for a
    mean-field chain, without it (the gradient then flows through the chain as well)."""
    p = RBMParams(*(t.requires_grad_(True) for t in
                    init_params(9, 5, init="uniform", scale=2.0, dtype=F64,
                                generator=torch.Generator().manual_seed(seed + 3))))
    v = bars_and_stripes(3, dtype=F64)[:6]
    start = (torch.rand(4, 5, generator=torch.Generator().manual_seed(seed + 1), dtype=F64) < 0.5
             ).to(F64) if from_hidden else v[:4]
    variants = [False, True] if chain == "mean_field" else [False]
    for unblocked in variants:
        grads = []
        for surrogate in (True, False):
            with disable_blocks(BLOCK) if unblocked else contextlib.nullcontext():
                v_model = negative_samples(p, start, 2, chain=chain, from_hidden=from_hidden,
                                           generator=torch.Generator().manual_seed(seed))
                assert v_model.requires_grad == unblocked
                if surrogate:
                    grads.append(core.cd_loss_grads(p, v, v_model)[0])
                else:
                    grads.append(torch.autograd.grad(cd_loss(p, v, v_model), list(p)))
        for got, want in zip(*grads):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        assert max(float(g.abs().max()) for g in grads[1]) > 1e-3  # not trivially zero


def test_the_loss_is_computed_only_when_read(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    X = bars_and_stripes(3, dtype=F64)
    real = torch.nn.functional.softplus
    calls: list[None] = []
    monkeypatch.setattr(torch.nn.functional, "softplus",
                        lambda *a, **k: (calls.append(None), real(*a, **k))[1])
    train_cd(fresh(), X, batch_size=5, epochs=2, generator=torch.Generator().manual_seed(seed))
    train_cd(fresh(), X, batch_size=5, epochs=2, generator=torch.Generator().manual_seed(seed),
             callback=lambda step: None)
    assert calls == []
    seen: list[float] = []

    def read(step: CDStep) -> None:
        loss = step.loss
        grads = torch.autograd.grad(loss, list(step.params))
        for got, want in zip(step.grads, grads):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
        seen.append(float(loss))
        assert float(loss) == pytest.approx(float(cd_loss(step.params, step.v_data,
                                                          step.v_model)), abs=1e-12)

    train_cd(fresh(), X, batch_size=5, epochs=1, generator=torch.Generator().manual_seed(seed),
             callback=read)
    assert len(seen) == 3 and calls


def test_small_problems_train_on_one_thread_and_restore_the_setting(
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    X = bars_and_stripes(3, dtype=F64)
    threads: list[int] = []
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train_cd(fresh(), X, batch_size=5, callback=lambda s: threads.append(
            torch.get_num_threads()))
        assert threads == [1, 1, 1] and torch.get_num_threads() == 2
        rbm = BernoulliRBM(3, batch_size=5, n_iter=2, random_state=seed, callback=lambda s: (
            threads.append(torch.get_num_threads())))
        threads.clear()
        rbm.fit(X.numpy())
        rbm.partial_fit(X.numpy())
        assert threads == [1] * 7 and torch.get_num_threads() == 2
        monkeypatch.setattr(training, "ONE_THREAD_WORK", 0)  # every problem is "large"
        threads.clear()
        train_cd(fresh(), X, batch_size=5, callback=lambda s: threads.append(
            torch.get_num_threads()))
        rbm.fit(X.numpy())
        assert threads == [2] * 9
    finally:
        torch.set_num_threads(before)
