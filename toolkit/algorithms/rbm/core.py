"""The functional core of the Bernoulli RBM: free energy, conditionals, Gibbs chain, CD loss.

A Bernoulli RBM with visible units ``v ∈ {0,1}^V``, hidden units ``h ∈ {0,1}^H``, weights ``W``
of shape ``(H, V)`` (like scikit-learn's ``components_``), visible bias ``b`` and hidden bias
``c`` has the energy ``E(v, h) = −b·v − c·h − hᵀ W v`` and the free energy

    F(v) = −log Σ_h exp(−E(v, h)) = −b·v − Σ_j softplus(c_j + W_j·v).

The log-likelihood gradient is ``∂ log p(v)/∂W = ⟨h vᵀ⟩_data − ⟨h vᵀ⟩_model``. Contrastive
divergence replaces the model expectation by samples ``v_model`` from a short Gibbs chain and,
with :func:`cd_loss` ``= mean F(v_data) − mean F(stop_gradient(v_model))``, autograd returns
exactly the (negated) CD update. The block :data:`BLOCK` is the one cut of the RBM: the chain
that produced ``v_model`` depends on the parameters, and the CD update treats its output as
fixed samples. Without the block a differentiable (mean-field) chain also passes gradient back
through its ``k`` steps, and the result is no longer the CD gradient.

References:
    G. E. Hinton (2002), "Training products of experts by minimizing contrastive divergence",
    Neural Computation 14(8). https://doi.org/10.1162/089976602760128018
    T. Tieleman (2008), "Training restricted Boltzmann machines using approximations to the
    likelihood gradient", ICML. https://doi.org/10.1145/1390156.1390290
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from toolkit._utils.array_validation import (
    as_tensor,
    check_dtype,
    check_tensor,
    resolve_device,
)
from toolkit._utils.memory import allocation_errors
from toolkit._utils.param_validation import (
    Bool,
    Generator,
    Integer,
    Options,
    Real,
    check,
    check_params,
)
from toolkit.core.stop_gradient import as_constant, require_block

#: The one cut of the RBM. The negative samples come from a Markov chain run with the current
#: parameters; the CD update (and the likelihood gradient it approximates) differentiates the
#: free energy at fixed samples, so no gradient may flow back through the chain.
BLOCK = "rbm.negative_samples"

#: The Gibbs chains that produce negative samples: binary samples at every step, or mean-field
#: probabilities ``v ← σ(b + σ(c + vWᵀ)W)`` (deterministic and differentiable).
CHAINS = ("sampled", "mean_field")

__all__ = [
    "BLOCK",
    "CHAINS",
    "RBMParams",
    "cd_gradient",
    "cd_loss",
    "free_energy",
    "gibbs_chain",
    "init_params",
    "negative_samples",
    "sample_hidden",
    "sample_visible",
]


class RBMParams(NamedTuple):
    """Parameters of a Bernoulli RBM.

    ``weights`` (n_hidden, n_visible), ``visible_bias`` (n_visible,), ``hidden_bias`` (n_hidden,).
    """

    weights: torch.Tensor
    visible_bias: torch.Tensor
    hidden_bias: torch.Tensor


# --------------------------------------------------------------------------------------------
# checks and kernels without checks, for the package's modules (not part of its API)


def check_rbm_params(params: Any, where: str) -> RBMParams:
    """``params`` as :class:`RBMParams` of three tensors of matching shapes (errors: ``where``)."""
    if not isinstance(params, tuple) or len(params) != 3:
        raise TypeError(f"{where}: params must be an RBMParams(weights, visible_bias, hidden_bias), "
                        f"got {type(params).__name__}")
    W, b, c = params
    for name, t in (("weights", W), ("visible_bias", b), ("hidden_bias", c)):
        check_tensor(where, f"params.{name}", t, allow_meta=True,
                     like=None if name == "weights" else W)
    if W.dim() != 2 or b.shape != (W.shape[1],) or c.shape != (W.shape[0],):
        raise ValueError(f"{where}: params must have weights (n_hidden, n_visible), visible_bias "
                         f"(n_visible,) and hidden_bias (n_hidden,); got {tuple(W.shape)}, "
                         f"{tuple(b.shape)}, {tuple(c.shape)}")
    return RBMParams(W, b, c)


def check_layer(x: Any, size: int, where: str, arg: str, *,
                like: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` if it is a dense (n_samples, ``size``) tensor, floating with the dtype and device
    of ``like`` (the weights) when given, else real-valued; errors name ``where`` and ``arg``."""
    check_tensor(where, arg, x, floating=like is not None, like=like)
    if x.dim() != 2 or x.shape[1] != size:
        raise ValueError(f"{where}: {arg} must have shape (n_samples, {size}), "
                         f"got {tuple(x.shape)}")
    return x


def is_column_major(W: torch.Tensor) -> bool:
    """Whether the matrix ``W`` is stored column by column (its transpose is contiguous) and
    not also row by row (a single row or column is both)."""
    return W.dim() == 2 and not W.is_contiguous() and W.T.is_contiguous()


def column_major(W: torch.Tensor) -> torch.Tensor:
    """``W`` (n_hidden, n_visible) with the same values, stored column by column.

    The layout the training update is fastest with: the gradient of the weights is the product
    ``vᵀ · σ'`` of the visible rows and the hidden units' cotangent, and autograd computes it in
    the layout of the weights. Stored column-major, it is a (n_visible × n_hidden) product,
    which a BLAS runs up to 1.4x faster at the RBM's shapes than the (n_hidden × n_visible)
    product a row-major ``W`` asks for (MKL on an AMD EPYC, digits: 99 µs against 142 µs in
    float64), and the chains' ``h · W`` is a product with a contiguous transposed operand
    (54 µs against 64 µs). ``benchmarks/bench_rbm.py`` measures the whole update.
    """
    return W if W.dim() != 2 or is_column_major(W) else W.T.contiguous().T


def _check_k(k: Any, where: str) -> int:
    return check(where, "k", k, [Integer(1)])


def bernoulli(p: torch.Tensor, generator: torch.Generator | None,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """Binary samples with P(1) = p (0/1 in p's dtype); sampling passes no gradient.

    The uniform numbers are always drawn in float32, whatever p's dtype: a float32 and a
    float64 model draw the same numbers from the same generator state, so their samples (and
    fits) agree to float32 precision, as scikit-learn's do (it draws float64 uniforms for both).
    float32 draws also take about a third of the time of float64 draws on the CPU. They lie on
    the grid ``k·2⁻²⁴``, so ``P(u < p) = ⌈p·2²⁴⌉/2²⁴``: within 6e-8 of ``p``.

    ``u < p`` is a comparison: it records no graph in any grad mode, so a sample is never a
    differentiable function of ``p``. Written with ``out=`` (into ``out`` when given, e.g. a
    persistent chain's state, else into ``u`` for a float32 ``p``; an in-place ``u.lt_(p)``
    would attach a zero-gradient node when p requires grad).
    """
    u = torch.rand(p.shape, generator=generator, dtype=torch.float32, device=p.device)
    if out is None:
        out = u if p.dtype == torch.float32 else torch.empty(p.shape, dtype=p.dtype,
                                                              device=p.device)
    return torch.lt(u, p, out=out)


def _hidden_input(params: RBMParams, v: torch.Tensor) -> torch.Tensor:
    """``a = c + v Wᵀ``, the hidden units' input for each row of ``v``: (rows, n_hidden)."""
    W, _, c = params
    return F.linear(v, W, c)


def _free_energy(params: RBMParams, v: torch.Tensor, a: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """``F(v) = −b·v − Σ_j softplus(a_j)`` of each row of ``v``, with ``a`` its
    :func:`_hidden_input` (computed when not given). The one place the free energy is written:
    :func:`free_energy`, :func:`cd_loss` and the training update's gradient all read it."""
    a = _hidden_input(params, v) if a is None else a
    return -(v @ params.visible_bias) - F.softplus(a).sum(dim=1)


def _fixed(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` as a constant of the CD update, behind :data:`BLOCK`: the RBM's one cut.

    The negative samples come from a Markov chain run with the current parameters. The CD
    update (and the maximum-likelihood gradient it approximates) differentiates the free
    energy at fixed samples: no gradient may flow back through the chain that produced them.
    While the block is active nothing of ``fn`` is recorded and its result is cut; inside
    ``disable_blocks(BLOCK)`` its graph is kept and the gradient flows back through it.
    """
    return as_constant(fn, *args, name=BLOCK)


def gibbs_steps(params: RBMParams, v: torch.Tensor, k: int, mean_field: bool,
                generator: torch.Generator | None) -> torch.Tensor:
    """:func:`gibbs_chain` without the argument checks: ``k`` steps ``v → h → v``."""
    W, b, c = params
    for _ in range(k):
        ph = torch.sigmoid(F.linear(v, W, c))
        h = ph if mean_field else bernoulli(ph, generator)
        pv = torch.sigmoid(torch.addmm(b, h, W))
        v = pv if mean_field else bernoulli(pv, generator)
    return v


def _gibbs_from_hidden(params: RBMParams, h: torch.Tensor, k: int, mean_field: bool,
                       generator: torch.Generator | None) -> torch.Tensor:
    """``k`` visible states from hidden states: ``h → v``, then ``k − 1`` steps ``v → h → v``."""
    W, b, _ = params
    pv = torch.sigmoid(torch.addmm(b, h, W))
    v = pv if mean_field else bernoulli(pv, generator)
    return gibbs_steps(params, v, k - 1, mean_field, generator)


def next_hidden(params: RBMParams, v: torch.Tensor, mean_field: bool,
                generator: torch.Generator | None, chain: torch.Tensor,
                prob: torch.Tensor | None = None) -> None:
    """Write into ``chain`` the hidden states a persistent chain keeps after ``v``: a sample of
    ``p(h|v)`` (its probabilities for a mean-field chain). ``prob``, when given, holds
    ``P(h=1|v)`` already computed by the update, shape (rows, n_hidden), which saves a matrix
    product and a sigmoid. Values, no graph (the caller runs it under ``no_grad``)."""
    if prob is None:
        W, _, c = params
        prob = torch.sigmoid(F.linear(v, W, c))
    if mean_field:
        chain.copy_(prob)
    else:
        bernoulli(prob, generator, out=chain)


def negative_chain(params: RBMParams, start: torch.Tensor, k: int, mean_field: bool,
                   generator: torch.Generator | None, where: str,
                   from_hidden: bool = False) -> torch.Tensor:
    """:func:`negative_samples` without the argument checks (``where`` names the caller)."""
    if not mean_field:
        # A Bernoulli draw is not a differentiable function of its probability: without the
        # block, a sampled chain would still pass no gradient, and the update would silently be
        # the CD update. Refuse instead.
        require_block(BLOCK, where=where,
                      why="a sampled Gibbs chain passes no gradient, so the update would silently "
                          "stay the CD update; use chain='mean_field' to train through the chain")
    # The negative samples are constants of the CD update (no graph is recorded for the chain
    # while the block is active); inside disable_blocks(BLOCK) the mean-field chain keeps its
    # graph and cd_loss's gradient flows back through its k steps.
    chain = _gibbs_from_hidden if from_hidden else gibbs_steps
    return _fixed(chain, params, start, k, mean_field, generator)


def _cd_weights(n_data: int, n_model: int, like: torch.Tensor) -> torch.Tensor:
    """Row weights ``(−1/n_data, …, 1/n_model, …)`` of :func:`weighted_cd_loss` (dtype/device
    of like)."""
    return torch.cat([like.new_full((n_data,), -1.0 / n_data),
                      like.new_full((n_model,), 1.0 / n_model)])


def cd_sum_weights(n_data: int, n_model: int, like: torch.Tensor) -> torch.Tensor:
    """``n_data`` times the row weights of :func:`_cd_weights`: ``(−1, …, n_data/n_model, …)``,
    ``±1`` when the counts are equal (dtype/device of like).

    The training loop differentiates with these and scales the step by ``1/n_data`` once, as
    scikit-learn does (``lr / n`` times the difference of the two sums). With ``±1`` the
    products ``w_r·σ(a_rj)`` and ``w_r·v_r`` are exact, so the data and model statistics cancel
    before the one rounding of the scaling; ``±1/n`` (``1/5``, ``1/10`` are not floats) rounds
    every term, and in float32 those roundings, of the size of the two sums rather than of
    their difference, made the median relative error of the visible biases 5–11x
    scikit-learn's (tests/algorithms/rbm/test_rbm_float32.py)."""
    return torch.cat([like.new_full((n_data,), -1.0),
                      like.new_full((n_model,), n_data / n_model)])


def _cd_rows(v_data: torch.Tensor, v_model: torch.Tensor, weights: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of ``v_data`` then of ``v_model``, the model's fixed (:func:`_fixed`: whatever
    the caller passes, a chain with its graph included), and their weights (default
    :func:`_cd_weights`)."""
    v = torch.cat([v_data, _fixed(lambda: v_model)])
    if weights is None:
        weights = _cd_weights(v_data.shape[0], v_model.shape[0], v)
    return v, weights


def weighted_cd_loss(params: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor,
                     weights: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`cd_loss` without the argument checks: ``mean F(v_data) − mean F(v_model)`` as
    one weighted sum over the rows of both sets, ``−Σ_r weights_r · F(v_r)``."""
    v, weights = _cd_rows(v_data, v_model, weights)
    return -(_free_energy(params, v) @ weights)


def cd_loss_grads(params: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor,
                  weights: torch.Tensor | None = None) -> tuple[RBMParams, torch.Tensor]:
    """The gradient of :func:`cd_loss` by autograd, without the loss's value; and the hidden
    probabilities ``P(h=1|v) = σ(c + v Wᵀ)`` of the rows of ``v_data`` then ``v_model``, shape
    (rows, n_hidden), which the training loop reuses for the persistent chains.

    ``cd_loss = Σ_r w_r (b·v_r + Σ_j softplus(a_rj))``, with pre-activations ``a = c + v Wᵀ``
    and row weights ``w = (−1/n_data, …, 1/n_model, …)`` (given ``weights``, the gradient of
    the same sum with those: the training loop passes :func:`cd_sum_weights`, ``n_data·w``,
    and scales the step by ``1/n_data``). Its gradient needs
    ``softplus'(a) = σ(a)``, never the softplus: it is the gradient of the surrogate

        S = Σ_r w_r (b·v_r + Σ_j stop_gradient(σ(a_rj)) · a_rj),

    whose value differs from ``cd_loss`` and whose gradient equals it at every point (with σ(a)
    held constant, the derivative of ``σ(a)·a`` is ``σ(a)``). This is one more place where a
    stop_gradient decides what is computed. It is written as a vector-Jacobian product:
    autograd receives ``w_r σ(a_rj)`` as the gradient of ``a`` (a cotangent, which autograd
    never differentiates) and ``w_r`` as the gradient of the rows' ``b·v_r``, and returns
    ``∂S/∂θ`` through the rest of the graph, including the chain's steps when
    ``disable_blocks(BLOCK)`` keeps them. It is therefore not a switchable block: differentiating σ(a) too would give
    the gradient of ``σ(a)·a``, another function, not the free energy without a cut (the free
    energy's gradient has no path through σ to cut). It saves the softplus and its backward.
    """
    v, weights = _cd_rows(v_data, v_model, weights)  # as in weighted_cd_loss: samples fixed
    b = params.visible_bias
    pre = _hidden_input(params, v)  # (rows, n_hidden); its v_model rows: the chains' next p(h|v)
    # σ(a) and the cotangent are values, computed without a graph: autograd never
    # differentiates a cotangent, so recording one would only cost time (no cut is decided)
    with torch.no_grad():
        prob = torch.sigmoid(pre)
        cotangent = prob * weights.unsqueeze(1)
    linear = torch.mv(v, b)  # b·v_r of each row, whose cotangent is w_r: one node, no scalar
    grads = torch.autograd.grad((pre, linear), list(params), grad_outputs=(cotangent, weights))
    return RBMParams(*grads), prob


# --------------------------------------------------------------------------------------------
# the model


def init_params(
    n_visible: int,
    n_hidden: int,
    *,
    init: str = "normal",
    scale: float | None = None,
    visible_bias: Any = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = "cpu",
) -> RBMParams:
    """Initial parameters (leaf tensors with ``requires_grad=True``), hidden biases zero.

    ``init="normal"``: weights ~ N(0, scale²), scale 0.01 by default (scikit-learn, Hinton's
    guide). ``init="uniform"``: weights ~ U(−scale, scale), scale 0.1 by default (the Shark
    library's bars-and-stripes tests). ``visible_bias`` defaults to zeros (give
    ``log(p/(1−p))`` of the data means for Hinton's recommended start). The random numbers are
    drawn on the CPU from ``generator``, so results do not depend on the device. ``device``:
    as everywhere in the toolkit (``None``/``"auto"``: CUDA if available, else CPU).

    >>> p = init_params(4, 3, generator=torch.Generator().manual_seed(0))
    >>> p.weights.shape, p.visible_bias.shape, p.hidden_bias.shape
    (torch.Size([3, 4]), torch.Size([4]), torch.Size([3]))
    """
    where = "init_params"
    check_params(where, {"n_visible": n_visible, "n_hidden": n_hidden, "init": init,
                         "scale": scale, "generator": generator},
                 {"n_visible": [Integer(1)], "n_hidden": [Integer(1)],
                  "init": [Options("normal", "uniform")], "scale": [None, Real(0)],
                  "generator": [None, Generator]})
    dtype = check_dtype(where, dtype)
    device = resolve_device(device, where=where)
    with allocation_errors(where, f"n_hidden={n_hidden} × n_visible={n_visible} weights"):
        if init == "normal":
            scale = 0.01 if scale is None else scale
            W = torch.randn(n_hidden, n_visible, generator=generator, dtype=torch.float64) * scale
        else:
            scale = 0.1 if scale is None else scale
            W = (torch.rand(n_hidden, n_visible, generator=generator, dtype=torch.float64) * 2
                 - 1) * scale
    if visible_bias is None:
        b = torch.zeros(n_visible, dtype=torch.float64)
    else:
        b = as_tensor(visible_bias, where=where, arg="visible_bias", dtype=torch.float64,
                      device="cpu", ndim=1, finite=True)
        if b.shape != (n_visible,):
            raise ValueError(f"{where}: visible_bias must have shape ({n_visible},), "
                             f"got {tuple(b.shape)}")
    c = torch.zeros(n_hidden, dtype=torch.float64)
    return RBMParams(*(t.to(device=device, dtype=dtype).requires_grad_(True) for t in (W, b, c)))


def free_energy(params: RBMParams, v: torch.Tensor) -> torch.Tensor:
    """Free energy ``F(v) = −b·v − Σ_j softplus(c_j + W_j·v)`` of each row of ``v``.

    ``v`` (n_samples, n_visible), binary or in [0, 1] (mean-field states); returns
    (n_samples,). ``exp(−F(v))`` is the unnormalised marginal ``Σ_h exp(−E(v, h))``.

    >>> p = RBMParams(torch.zeros(3, 2), torch.zeros(2), torch.zeros(3))
    >>> round(float(free_energy(p, torch.ones(1, 2))), 3)  # −3·log 2
    -2.079
    """
    params = check_rbm_params(params, "free_energy")
    check_layer(v, params.weights.shape[1], "free_energy", "v", like=params.weights)
    return _free_energy(params, v)


def sample_hidden(
    params: RBMParams, v: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``P(h=1|v) = σ(c + v Wᵀ)`` and a binary sample from it, both (n_samples, n_hidden)."""
    W, _, c = check_rbm_params(params, "sample_hidden")
    check("sample_hidden", "generator", generator, [None, Generator])
    check_layer(v, W.shape[1], "sample_hidden", "v", like=W)
    p = torch.sigmoid(torch.addmm(c, v, W.T))
    return p, bernoulli(p, generator)


def sample_visible(
    params: RBMParams, h: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``P(v=1|h) = σ(b + h W)`` and a binary sample from it, both (n_samples, n_visible)."""
    W, b, _ = check_rbm_params(params, "sample_visible")
    check("sample_visible", "generator", generator, [None, Generator])
    check_layer(h, W.shape[0], "sample_visible", "h", like=W)
    p = torch.sigmoid(torch.addmm(b, h, W))
    return p, bernoulli(p, generator)


def gibbs_chain(
    params: RBMParams,
    v: torch.Tensor,
    k: int,
    *,
    mean_field: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Run ``k`` steps of block Gibbs sampling ``v → h → v`` from ``v``; return the last ``v``.

    ``mean_field=False``: binary samples at every step (not differentiable: the sampling passes
    no gradient). ``mean_field=True``: probabilities are propagated instead of samples,
    ``v ← σ(b + σ(c + v Wᵀ) W)``, deterministic and differentiable with respect to the
    parameters (and to ``v``). A plain sampler that records a graph as any torch code does;
    the negative samples of a training update come from :func:`negative_samples`, which runs
    this chain behind the block.

    Shapes: ``v`` (n_chains, n_visible) → (n_chains, n_visible).
    """
    params = check_rbm_params(params, "gibbs_chain")
    _check_k(k, "gibbs_chain")
    check("gibbs_chain", "mean_field", mean_field, [Bool])
    check("gibbs_chain", "generator", generator, [None, Generator])
    check_layer(v, params.weights.shape[1], "gibbs_chain", "v",
                like=params.weights)
    return gibbs_steps(params, v, k, mean_field, generator)


def negative_samples(
    params: RBMParams,
    start: torch.Tensor,
    k: int,
    *,
    chain: str = "sampled",
    from_hidden: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The negative samples of a CD/PCD update: ``k`` Gibbs steps from ``start``, behind the block.

    ``start`` is the mini-batch (CD-k), shape (n_chains, n_visible), or with
    ``from_hidden=True`` the hidden states of persistent chains (PCD-k, kept as scikit-learn
    keeps them), shape (n_chains, n_hidden): the chain then begins with ``v ~ p(v|h)`` and
    takes ``k − 1`` further steps. Returns (n_chains, n_visible). The chain (:func:`gibbs_chain`) runs
    as a constant behind :data:`BLOCK` (:func:`toolkit.as_constant`): while the block is
    active it records no graph and the result is cut, so :func:`cd_loss` gives the CD update.
    Inside ``disable_blocks(BLOCK)``:

    - ``chain="mean_field"``: the chain records its graph (in the caller's grad mode), and the
      gradient of :func:`cd_loss` flows back through its ``k`` steps ("through the chain");
    - ``chain="sampled"``: raises :class:`toolkit.BlockNotSwitchableError`, because sampling
      passes no gradient and the update would silently stay the same.

    >>> p = init_params(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> v = torch.tensor([[1., 0., 1., 1.]], dtype=torch.float64)
    >>> negative_samples(p, v, 2, chain="mean_field").requires_grad  # cut by the block
    False
    """
    where = "negative_samples"
    params = check_rbm_params(params, where)
    _check_k(k, where)
    check(where, "chain", chain, [Options(*CHAINS)])
    check(where, "from_hidden", from_hidden, [Bool])
    check(where, "generator", generator, [None, Generator])
    check_layer(start, params.weights.shape[0 if from_hidden else 1], where, "start",
                like=params.weights)
    return negative_chain(params, start, k, chain == "mean_field", generator, where, from_hidden)


def cd_loss(params: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor) -> torch.Tensor:
    """Contrastive-divergence surrogate ``mean F(v_data) − mean F(stop_gradient(v_model))``.

    Its gradient is the negated CD update: for the weights,
    ``∂L/∂W = −(⟨p(h|v) vᵀ⟩_data − ⟨p(h|v) vᵀ⟩_model)`` with the averages over the rows of
    ``v_data`` and of ``v_model`` (they may have different numbers of rows, e.g. PCD chains).
    Minimise it (gradient descent) to follow the CD update. The loss value itself is not a
    log-likelihood.

    >>> g = torch.Generator().manual_seed(0)
    >>> p = init_params(4, 3, generator=g, dtype=torch.float64)
    >>> v = torch.tensor([[1., 0., 1., 1.]], dtype=torch.float64)
    >>> loss = cd_loss(p, v, gibbs_chain(p, v, 1, generator=g))
    >>> loss.backward(); p.weights.grad.shape
    torch.Size([3, 4])
    """
    # The negative samples come from a Markov chain run with the current parameters. The CD
    # update (and the maximum-likelihood gradient it approximates) differentiates the free
    # energy at fixed samples: no gradient may flow back through the chain that produced them.
    params = check_rbm_params(params, "cd_loss")
    check_layer(v_data, params.weights.shape[1], "cd_loss", "v_data", like=params.weights)
    check_layer(v_model, params.weights.shape[1], "cd_loss", "v_model", like=params.weights)
    return weighted_cd_loss(params, v_data, v_model)


def cd_gradient(params: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor) -> RBMParams:
    """Closed-form gradient of :func:`cd_loss` (the negated CD statistics), no autograd.

    ``dW = −(mean p(h|v_d) v_dᵀ − mean p(h|v_m) v_mᵀ)``, ``db = −(mean v_d − mean v_m)``,
    ``dc = −(mean p(h|v_d) − mean p(h|v_m))``. Returned as :class:`RBMParams` of gradients.
    """
    W, _, c = check_rbm_params(params, "cd_gradient")
    check_layer(v_data, W.shape[1], "cd_gradient", "v_data", like=W)
    check_layer(v_model, W.shape[1], "cd_gradient", "v_model", like=W)
    with torch.no_grad():
        hd = torch.sigmoid(torch.addmm(c, v_data, W.T))
        hm = torch.sigmoid(torch.addmm(c, v_model, W.T))
        nd, nm = v_data.shape[0], v_model.shape[0]
        dW = -(hd.T @ v_data / nd - hm.T @ v_model / nm)
        db = -(v_data.mean(0) - v_model.mean(0))
        dc = -(hd.mean(0) - hm.mean(0))
    return RBMParams(dW, db, dc)
