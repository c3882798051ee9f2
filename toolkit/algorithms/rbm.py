"""Restricted Boltzmann machines trained by contrastive divergence (CD-k) and persistent CD.

A Bernoulli RBM with visible units ``v ∈ {0,1}^V``, hidden units ``h ∈ {0,1}^H``, weights ``W``
of shape ``(H, V)`` (like scikit-learn's ``components_``), visible bias ``b`` and hidden bias
``c`` has the energy ``E(v, h) = −b·v − c·h − hᵀ W v`` and the free energy

    F(v) = −log Σ_h exp(−E(v, h)) = −b·v − Σ_j softplus(c_j + W_j·v).

The log-likelihood gradient is ``∂ log p(v)/∂W = ⟨h vᵀ⟩_data − ⟨h vᵀ⟩_model``. Contrastive
divergence replaces the model expectation by samples ``v_model`` from a short Gibbs chain and,
with :func:`cd_loss` ``= mean F(v_data) − mean F(stop_gradient(v_model))``, autograd returns
exactly the (negated) CD update. The block ``"rbm.negative_samples"`` is the one named
``stop_gradient`` of this module: the chain that produced ``v_model`` depends on the parameters,
and the CD update treats its output as fixed samples. Without the block a differentiable
(mean-field) chain also passes gradient back through its ``k`` steps, and the result is no
longer the CD gradient.

Evaluation: :func:`exact_log_partition` (enumeration of the smaller layer),
:func:`ais_log_partition` (annealed importance sampling, Salakhutdinov & Murray 2008),
:func:`log_likelihood` and :func:`pseudo_log_likelihood` (scikit-learn's ``score_samples``).

References:
    G. E. Hinton (2002), "Training products of experts by minimizing contrastive divergence",
    Neural Computation 14(8). https://doi.org/10.1162/089976602760128018
    T. Tieleman (2008), "Training restricted Boltzmann machines using approximations to the
    likelihood gradient", ICML. https://doi.org/10.1145/1390156.1390290
    R. Salakhutdinov and I. Murray (2008), "On the quantitative analysis of deep belief
    networks", ICML. https://doi.org/10.1145/1390156.1390266
    G. E. Hinton (2010), "A practical guide to training restricted Boltzmann machines",
    UTML TR 2010-003. https://www.cs.toronto.edu/~hinton/absps/guideTR.pdf
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from toolkit.core.stop_gradient import stop_gradient

__all__ = [
    "AISResult",
    "BernoulliRBM",
    "RBMParams",
    "ais_log_partition",
    "cd_gradient",
    "cd_loss",
    "exact_log_likelihood_gradient",
    "exact_log_partition",
    "free_energy",
    "gibbs_chain",
    "init_params",
    "log_likelihood",
    "pseudo_log_likelihood",
    "sample_hidden",
    "sample_visible",
]

#: Largest layer size that :func:`exact_log_partition` enumerates (2**20 configurations).
MAX_EXACT_UNITS = 20


class RBMParams(NamedTuple):
    """Parameters of a Bernoulli RBM.

    ``weights`` (n_hidden, n_visible), ``visible_bias`` (n_visible,), ``hidden_bias`` (n_hidden,).
    """

    weights: torch.Tensor
    visible_bias: torch.Tensor
    hidden_bias: torch.Tensor


class AISResult(NamedTuple):
    """Result of :func:`ais_log_partition`.

    ``log_partition``: the estimate ``log Ẑ`` (0-dim float64 tensor); ``stderr``: its standard
    error (delta method, ``std(w) / (√M · mean(w))``); ``log_weights``: the ``M`` importance
    log-weights (``log Ẑ = log Z_base + logmeanexp(log_weights)``).
    """

    log_partition: torch.Tensor
    stderr: torch.Tensor
    log_weights: torch.Tensor


# --------------------------------------------------------------------------------------------
# validation helpers


def _check_params(params: Any, where: str) -> RBMParams:
    if not isinstance(params, tuple) or len(params) != 3:
        raise TypeError(f"{where}: params must be an RBMParams(weights, visible_bias, hidden_bias), "
                        f"got {type(params).__name__}")
    W, b, c = params
    for name, t in (("weights", W), ("visible_bias", b), ("hidden_bias", c)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: params.{name} must be a torch.Tensor, got {type(t).__name__}")
    if W.dim() != 2 or b.shape != (W.shape[1],) or c.shape != (W.shape[0],):
        raise ValueError(f"{where}: params must have weights (n_hidden, n_visible), visible_bias "
                         f"(n_visible,) and hidden_bias (n_hidden,); got {tuple(W.shape)}, "
                         f"{tuple(b.shape)}, {tuple(c.shape)}")
    return RBMParams(W, b, c)


def _check_layer(x: Any, size: int, where: str, arg: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{where}: {arg} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.shape[1] != size:
        raise ValueError(f"{where}: {arg} must have shape (n_samples, {size}), "
                         f"got {tuple(x.shape)}")
    return x


def _check_k(k: Any, where: str) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{where}: k must be an int >= 1 (number of Gibbs steps), got {k!r}")
    return k


def _bernoulli(p: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Binary samples with P(1) = p (same dtype as p); sampling passes no gradient."""
    if torch.is_grad_enabled():  # a sample is not a differentiable function of p
        with torch.no_grad():
            return _bernoulli(p, generator)
    u = torch.rand(p.shape, generator=generator, dtype=p.dtype, device=p.device)
    return u.lt_(p)  # in place: u ← (u < p) as 0/1 in p's dtype, no extra allocation


def _free_energy(params: RBMParams, v: torch.Tensor) -> torch.Tensor:
    W, b, c = params
    return -(v @ b) - F.softplus(F.linear(v, W, c)).sum(dim=1)


def _gibbs(params: RBMParams, v: torch.Tensor, k: int, mean_field: bool,
           generator: torch.Generator | None) -> torch.Tensor:
    W, b, c = params
    for _ in range(k):
        ph = torch.sigmoid(F.linear(v, W, c))
        h = ph if mean_field else _bernoulli(ph, generator)
        pv = torch.sigmoid(torch.addmm(b, h, W))
        v = pv if mean_field else _bernoulli(pv, generator)
    return v


def _cd_weights(n_data: int, n_model: int, like: torch.Tensor) -> torch.Tensor:
    """Row weights ``(−1/n_data, …, 1/n_model, …)`` of :func:`_cd_loss` (dtype/device of like)."""
    return torch.cat([like.new_full((n_data,), -1.0 / n_data),
                      like.new_full((n_model,), 1.0 / n_model)])


def _cd_loss(params: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor,
             weights: torch.Tensor | None = None) -> torch.Tensor:
    # The negative samples come from a Markov chain run with the current parameters. The CD
    # update (and the maximum-likelihood gradient it approximates) differentiates the free
    # energy at fixed samples: no gradient may flow back through the chain that produced them.
    v_model = stop_gradient(v_model, name="rbm.negative_samples")
    W, b, c = params
    v = torch.cat([v_data, v_model])
    if weights is None:
        weights = _cd_weights(v_data.shape[0], v_model.shape[0], v)
    # mean F(v_data) − mean F(v_model) as one weighted sum over the rows of both sets,
    # Σ_i weights_i · (−F(v_i)) with −F(v) = b·v + Σ_j softplus(c_j + W_j·v). Written for a
    # small autograd graph (a training step is mostly per-operation overhead): pre-activations
    # as (n_hidden, rows) = addmm(c as a column, W, vᵀ), whose weight gradient is a plain
    # (n_hidden, rows) @ (rows, n_visible) product, and b·v + Σ_j softplus(·) as one addmv.
    pre = torch.addmm(c.unsqueeze(1), W, v.T)
    return torch.addmv(F.softplus(pre).sum(dim=0), v, b) @ weights


# --------------------------------------------------------------------------------------------
# the model


def init_params(
    n_visible: int,
    n_hidden: int,
    *,
    init: str = "normal",
    scale: float | None = None,
    visible_bias: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> RBMParams:
    """Initial parameters (leaf tensors with ``requires_grad=True``), hidden biases zero.

    ``init="normal"``: weights ~ N(0, scale²), scale 0.01 by default (scikit-learn, Hinton's
    guide). ``init="uniform"``: weights ~ U(−scale, scale), scale 0.1 by default (the Shark
    library's bars-and-stripes tests). ``visible_bias`` defaults to zeros (give
    ``log(p/(1−p))`` of the data means for Hinton's recommended start). The random numbers are
    drawn on the CPU from ``generator``, so results do not depend on the device.
    """
    for arg, value in (("n_visible", n_visible), ("n_hidden", n_hidden)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"init_params: {arg} must be a positive int, got {value!r}")
    if init == "normal":
        scale = 0.01 if scale is None else scale
        W = torch.randn(n_hidden, n_visible, generator=generator, dtype=torch.float64) * scale
    elif init == "uniform":
        scale = 0.1 if scale is None else scale
        W = (torch.rand(n_hidden, n_visible, generator=generator, dtype=torch.float64) * 2 - 1) * scale
    else:
        raise ValueError(f"init_params: init must be 'normal' or 'uniform', got {init!r}")
    if scale < 0:
        raise ValueError(f"init_params: scale must be >= 0, got {scale!r}")
    b = torch.zeros(n_visible, dtype=torch.float64) if visible_bias is None else (
        torch.as_tensor(visible_bias, dtype=torch.float64).reshape(n_visible))
    c = torch.zeros(n_hidden, dtype=torch.float64)
    return RBMParams(*(t.to(device=device, dtype=dtype).requires_grad_(True) for t in (W, b, c)))


def free_energy(params: RBMParams, v: torch.Tensor) -> torch.Tensor:
    """Free energy ``F(v) = −b·v − Σ_j softplus(c_j + W_j·v)`` of each row of ``v``.

    ``v`` (n_samples, n_visible), binary or in [0, 1] (mean-field states); returns
    (n_samples,). ``exp(−F(v))`` is the unnormalised marginal ``Σ_h exp(−E(v, h))``.

    >>> p = RBMParams(torch.zeros(3, 2), torch.zeros(2), torch.zeros(3))
    >>> free_energy(p, torch.ones(1, 2))  # −3·log 2
    tensor([-2.0794])
    """
    params = _check_params(params, "free_energy")
    _check_layer(v, params.weights.shape[1], "free_energy", "v")
    return _free_energy(params, v)


def sample_hidden(
    params: RBMParams, v: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``P(h=1|v) = σ(c + v Wᵀ)`` and a binary sample from it, both (n_samples, n_hidden)."""
    W, _, c = _check_params(params, "sample_hidden")
    _check_layer(v, W.shape[1], "sample_hidden", "v")
    p = torch.sigmoid(torch.addmm(c, v, W.T))
    return p, _bernoulli(p, generator)


def sample_visible(
    params: RBMParams, h: torch.Tensor, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``P(v=1|h) = σ(b + h W)`` and a binary sample from it, both (n_samples, n_visible)."""
    W, b, _ = _check_params(params, "sample_visible")
    _check_layer(h, W.shape[0], "sample_visible", "h")
    p = torch.sigmoid(torch.addmm(b, h, W))
    return p, _bernoulli(p, generator)


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
    parameters (and to ``v``); this is the chain whose gradient flows when the block
    ``"rbm.negative_samples"`` is disabled.

    Shapes: ``v`` (n_chains, n_visible) → (n_chains, n_visible).
    """
    params = _check_params(params, "gibbs_chain")
    _check_k(k, "gibbs_chain")
    _check_layer(v, params.weights.shape[1], "gibbs_chain", "v")
    return _gibbs(params, v, k, mean_field, generator)


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
    params = _check_params(params, "cd_loss")
    _check_layer(v_data, params.weights.shape[1], "cd_loss", "v_data")
    _check_layer(v_model, params.weights.shape[1], "cd_loss", "v_model")
    return _cd_loss(params, v_data, v_model)


def cd_gradient(params: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor) -> RBMParams:
    """Closed-form gradient of :func:`cd_loss` (the negated CD statistics), no autograd.

    ``dW = −(mean p(h|v_d) v_dᵀ − mean p(h|v_m) v_mᵀ)``, ``db = −(mean v_d − mean v_m)``,
    ``dc = −(mean p(h|v_d) − mean p(h|v_m))``. Returned as :class:`RBMParams` of gradients.
    """
    W, _, c = _check_params(params, "cd_gradient")
    _check_layer(v_data, W.shape[1], "cd_gradient", "v_data")
    _check_layer(v_model, W.shape[1], "cd_gradient", "v_model")
    with torch.no_grad():
        hd = torch.sigmoid(torch.addmm(c, v_data, W.T))
        hm = torch.sigmoid(torch.addmm(c, v_model, W.T))
        nd, nm = v_data.shape[0], v_model.shape[0]
        dW = -(hd.T @ v_data / nd - hm.T @ v_model / nm)
        db = -(v_data.mean(0) - v_model.mean(0))
        dc = -(hd.mean(0) - hm.mean(0))
    return RBMParams(dW, db, dc)


# --------------------------------------------------------------------------------------------
# partition function and likelihoods


def _configurations(n: int, start: int, stop: int, dtype: torch.dtype,
                    device: torch.device) -> torch.Tensor:
    """Rows ``start..stop-1`` of the 2**n binary configurations (bit i of the code → unit i)."""
    codes = torch.arange(start, stop, device=device)
    return ((codes[:, None] >> torch.arange(n, device=device)) & 1).to(dtype)


def _log_unnormalized_smaller_layer(params: RBMParams, s: torch.Tensor, hidden: bool) -> torch.Tensor:
    """log Σ_other exp(−E) for configurations ``s`` of the smaller layer (hidden or visible)."""
    W, b, c = params
    if hidden:  # log p*(h) = c·h + Σ_i softplus(b_i + (h W)_i)
        return s @ c + F.softplus(torch.addmm(b, s, W)).sum(dim=1)
    return s @ b + F.softplus(torch.addmm(c, s, W.T)).sum(dim=1)  # = −F(v)


def exact_log_partition(params: RBMParams, *, chunk_elements: int = 2**22) -> torch.Tensor:
    """``log Z = log Σ_{v,h} exp(−E(v, h))`` by enumerating the smaller layer.

    With ``H ≤ V`` it sums ``log Σ_h exp(c·h + Σ_i softplus(b_i + (hW)_i))`` over the ``2^H``
    hidden configurations (else ``Σ_v exp(−F(v))`` over ``2^V``), in chunks of about
    ``chunk_elements`` entries of the ``(configurations × other layer)`` matrix, combined with
    ``logsumexp``. Differentiable: ``∂ log Z/∂θ`` is the model expectation of ``−∂E/∂θ``.
    The smaller layer may have at most ``MAX_EXACT_UNITS = 20`` units. Use float64 for
    accurate likelihoods.

    >>> p = RBMParams(torch.zeros(2, 3), torch.zeros(3), torch.zeros(2))
    >>> round(float(exact_log_partition(p)), 4) == round(5 * math.log(2), 4)
    True
    """
    params = _check_params(params, "exact_log_partition")
    W = params.weights
    n_hidden, n_visible = W.shape
    hidden = n_hidden <= n_visible
    n_small, n_other = (n_hidden, n_visible) if hidden else (n_visible, n_hidden)
    if n_small > MAX_EXACT_UNITS:
        raise ValueError(f"exact_log_partition: the smaller layer must have at most "
                         f"{MAX_EXACT_UNITS} units to enumerate, got {n_small} "
                         f"(n_visible={n_visible}, n_hidden={n_hidden}); use ais_log_partition")
    if not isinstance(chunk_elements, int) or chunk_elements < 1:
        raise ValueError(f"exact_log_partition: chunk_elements must be a positive int, "
                         f"got {chunk_elements!r}")
    total = 2**n_small
    rows = max(1, min(total, chunk_elements // max(n_other, 1)))
    parts = []
    for start in range(0, total, rows):
        s = _configurations(n_small, start, min(start + rows, total), W.dtype, W.device)
        parts.append(torch.logsumexp(_log_unnormalized_smaller_layer(params, s, hidden), dim=0))
    return parts[0] if len(parts) == 1 else torch.logsumexp(torch.stack(parts), dim=0)


def log_likelihood(
    params: RBMParams, v: torch.Tensor, *, log_partition: torch.Tensor | float | None = None
) -> torch.Tensor:
    """``log p(v) = −F(v) − log Z`` per row of ``v`` (n_samples,).

    ``log_partition`` defaults to :func:`exact_log_partition` (differentiable); pass an AIS
    estimate for larger models.
    """
    params = _check_params(params, "log_likelihood")
    _check_layer(v, params.weights.shape[1], "log_likelihood", "v")
    log_z = exact_log_partition(params) if log_partition is None else log_partition
    return -free_energy(params, v) - log_z


def exact_log_likelihood_gradient(params: RBMParams, v_data: torch.Tensor) -> RBMParams:
    """Gradient of the mean negative log-likelihood ``−mean log p(v_data)`` (exact).

    Equals ``−(⟨h vᵀ⟩_data − ⟨h vᵀ⟩_model)`` etc.; computed by autograd through
    :func:`exact_log_partition` (the model expectations by enumeration of the smaller layer).
    Same sign convention as :func:`cd_loss`'s gradient.
    """
    params = _check_params(params, "exact_log_likelihood_gradient")
    # Fresh leaves (copies made without a graph), so the caller's tensors and .grad are untouched.
    with torch.no_grad():
        copies = [t.clone() for t in params]
    with torch.enable_grad():
        leaves = RBMParams(*(t.requires_grad_(True) for t in copies))
        nll = -log_likelihood(leaves, v_data).mean()
        grads = torch.autograd.grad(nll, list(leaves))
    return RBMParams(*grads)


def pseudo_log_likelihood(
    params: RBMParams,
    v: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """Stochastic pseudo-log-likelihood per sample, scikit-learn's ``score_samples`` formula.

    For each row one unit ``i`` is drawn uniformly at random (``indices`` to fix them) and
    flipped, giving ``ṽ``; the estimate is ``V · log σ(F(ṽ) − F(v))``, an unbiased estimate of
    ``Σ_i log P(v_i | v_{−i})`` (V = n_visible). The result is random: it depends on the
    drawn indices (from ``generator``).

    Reference: scikit-learn ``BernoulliRBM.score_samples``
    (https://scikit-learn.org/stable/modules/generated/sklearn.neural_network.BernoulliRBM.html).
    """
    params = _check_params(params, "pseudo_log_likelihood")
    n_visible = params.weights.shape[1]
    _check_layer(v, n_visible, "pseudo_log_likelihood", "v")
    n = v.shape[0]
    if indices is None:
        indices = torch.randint(0, n_visible, (n,), generator=generator).to(v.device)
    else:
        indices = torch.as_tensor(indices, device=v.device)
        if indices.shape != (n,) or indices.min() < 0 or indices.max() >= n_visible:
            raise ValueError(f"pseudo_log_likelihood: indices must be {n} ints in "
                             f"[0, {n_visible}), got shape {tuple(indices.shape)}")
    rows = torch.arange(n, device=v.device)
    v_flip = v.clone()
    v_flip[rows, indices] = 1 - v_flip[rows, indices]
    return -n_visible * F.softplus(-(free_energy(params, v_flip) - free_energy(params, v)))


def ais_log_partition(
    params: RBMParams,
    *,
    data: torch.Tensor | None = None,
    base_visible_bias: torch.Tensor | None = None,
    n_runs: int = 100,
    betas: int | torch.Tensor = 14500,
    generator: torch.Generator | None = None,
) -> AISResult:
    """Estimate ``log Z`` by annealed importance sampling (Salakhutdinov & Murray, 2008).

    The base model A has zero weights and hidden biases and visible biases
    ``b_A = logit((Σ data + 1) / (n_samples + 2))`` (the "base-rate" model: smoothed data
    means), or ``base_visible_bias`` if given, or zeros (uniform) if neither is given, so
    ``log Z_A = Σ_i softplus(b_A,i) + H log 2`` exactly. The intermediate distributions are

        log p*_β(v) = (1−β) b_A·v + β b·v + Σ_j softplus(β (c_j + W_j·v)),

    from ``p_0 = p_A`` to ``p_1 = p_B`` (the RBM); each run draws ``v ~ p_A`` and moves through
    the ``β_k`` with one Gibbs step ``T_k`` (tempered conditionals) per temperature,
    accumulating ``log w = Σ_k log p*_{β_k}(v_{k−1}) − log p*_{β_{k−1}}(v_{k−1})``. Then
    ``log Ẑ = log Z_A + logmeanexp(log w)`` (unbiased in ``Z``, biased low in ``log Z``), and the
    standard error of ``log Ẑ`` is ``std(w)/(√M mean(w))``. Runs are vectorised.

    ``betas``: an int K uses the paper's schedule shape (K·500/14500 steps on [0, 0.5],
    K·4000/14500 on [0.5, 0.9], the rest on [0.9, 1]); or an increasing 1-D tensor from 0 to 1.
    Computed in float64 without gradient. Shapes: ``data`` (n_samples, n_visible).
    """
    params = _check_params(params, "ais_log_partition")
    if not isinstance(n_runs, int) or isinstance(n_runs, bool) or n_runs < 2:
        raise ValueError(f"ais_log_partition: n_runs must be an int >= 2, got {n_runs!r}")
    W, b, c = (t.to(torch.float64) for t in params)
    device = W.device
    n_hidden, n_visible = W.shape
    if isinstance(betas, int) and not isinstance(betas, bool):
        if betas < 3:
            raise ValueError(f"ais_log_partition: betas must be >= 3 temperatures, got {betas}")
        n1 = max(1, round(betas * 500 / 14500))
        n2 = max(1, round(betas * 4000 / 14500))
        n3 = max(1, betas - n1 - n2)
        beta_list = torch.cat([torch.linspace(0, 0.5, n1 + 1, dtype=torch.float64)[:-1],
                               torch.linspace(0.5, 0.9, n2 + 1, dtype=torch.float64)[:-1],
                               torch.linspace(0.9, 1.0, n3, dtype=torch.float64)])
    else:
        beta_list = torch.as_tensor(betas, dtype=torch.float64).cpu()
        if (beta_list.dim() != 1 or beta_list.numel() < 2 or beta_list[0] != 0
                or beta_list[-1] != 1 or (beta_list.diff() <= 0).any()):
            raise ValueError("ais_log_partition: betas must be an int or an increasing 1-D "
                             "sequence from 0 to 1")
    if data is not None and base_visible_bias is not None:
        raise ValueError("ais_log_partition: give data or base_visible_bias, not both")
    if base_visible_bias is not None:
        b_a = torch.as_tensor(base_visible_bias, dtype=torch.float64, device=device)
        if b_a.shape != (n_visible,) or not bool(torch.isfinite(b_a).all()):
            raise ValueError(f"ais_log_partition: base_visible_bias must be {n_visible} finite "
                             f"numbers, got shape {tuple(b_a.shape)}")
    elif data is None:
        b_a = torch.zeros(n_visible, dtype=torch.float64, device=device)
    else:
        _check_layer(data, n_visible, "ais_log_partition", "data")
        # Smoothed data means (as if each pixel had been seen on and off once more).
        mean = (data.to(torch.float64).sum(0) + 1) / (data.shape[0] + 2)
        b_a = torch.logit(mean).to(device)
    log_z_a = F.softplus(b_a).sum() + n_hidden * math.log(2)
    betas_l = beta_list.tolist()
    with torch.no_grad():
        v = _bernoulli(torch.sigmoid(b_a).expand(n_runs, n_visible).contiguous(), generator)
        log_w = torch.zeros(n_runs, dtype=torch.float64, device=device)
        for k in range(1, len(betas_l)):
            beta, prev = betas_l[k], betas_l[k - 1]
            act = torch.addmm(c, v, W.T)  # (M, H)
            # log p*_β(v) − log p*_β'(v); the visible terms are linear in β.
            log_w += (beta - prev) * (v @ (b - b_a))
            log_w += (F.softplus(beta * act) - F.softplus(prev * act)).sum(1)
            if k < len(betas_l) - 1:
                h = _bernoulli(torch.sigmoid(beta * act), generator)
                v = _bernoulli(torch.sigmoid((1 - beta) * b_a + beta * torch.addmm(b, h, W)),
                               generator)
        log_mean_w = torch.logsumexp(log_w, 0) - math.log(n_runs)
        r = torch.exp(log_w - log_w.max())
        stderr = r.std() / (math.sqrt(n_runs) * r.mean())
    return AISResult(log_z_a + log_mean_w, stderr, log_w)


# --------------------------------------------------------------------------------------------
# the estimator


def _as_matrix(X: Any, where: str, *, dtype: torch.dtype, device: torch.device,
               binary: bool, n_features: int | None = None) -> torch.Tensor:
    """Validate ``X`` (array-like (n_samples, n_features)) and return it as a tensor."""
    if isinstance(X, torch.Tensor):
        t = X
    else:
        try:
            t = torch.as_tensor(np.asarray(X, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{where}: X must be a 2-D array or tensor of numbers, "
                            f"got {type(X).__name__}") from err
    if t.dim() != 2 or t.shape[0] == 0:
        raise ValueError(f"{where}: X must be a non-empty 2-D array (n_samples, n_features), "
                         f"got shape {tuple(t.shape)}")
    if n_features is not None and t.shape[1] != n_features:
        raise ValueError(f"{where}: X has {t.shape[1]} features, but the model was fitted with "
                         f"{n_features} (n_visible)")
    t = t.to(device=device, dtype=dtype)
    if binary:
        if not bool(((t == 0) | (t == 1)).all()):
            raise ValueError(f"{where}: X must be binary (only 0 and 1) for a Bernoulli RBM, got "
                             f"values in [{float(t.min()):g}, {float(t.max()):g}]; threshold "
                             f"it (e.g. toolkit.data.binarized_digits)")
    elif not bool(((t >= 0) & (t <= 1)).all()):
        raise ValueError(f"{where}: X must have values in [0, 1], got values in "
                         f"[{float(t.min()):g}, {float(t.max()):g}]")
    return t


def _resolve_device(device: torch.device | str | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if device == "auto" and torch.cuda.is_available() else "cpu")
    return torch.device(device)


class BernoulliRBM:
    """Bernoulli RBM trained with CD-k or persistent CD (PCD-k), by autograd of :func:`cd_loss`.

    Each update draws negative samples with ``k`` Gibbs steps (from the mini-batch for
    ``method="cd"``, from ``n_chains`` persistent chains for ``method="pcd"``), takes the
    gradient of ``cd_loss`` (whose block ``"rbm.negative_samples"`` keeps the chain out of the
    gradient) and applies SGD with momentum and L2 weight decay (on the weights only, as in
    Hinton's guide):

        u ← momentum · u − learning_rate · (∇θ cd_loss + weight_decay · W),   θ ← θ + u.

    ``cd_loss`` averages over the batch, so ``learning_rate`` is per-sample as in
    scikit-learn's ``BernoulliRBM`` (which divides its summed update by the batch size).

    Args:
        n_hidden: number of hidden units.
        method: ``"cd"`` (chains restart at the data) or ``"pcd"`` (persistent chains,
            Tieleman 2008; scikit-learn's ``BernoulliRBM`` does PCD-1).
        k: Gibbs steps per update (>= 1).
        learning_rate, batch_size, epochs, momentum, weight_decay: SGD settings; each epoch
            visits the data once in an order shuffled with the model's generator.
        n_chains: number of persistent chains for PCD (default ``batch_size``).
        init: ``"normal"`` (N(0, 0.01²), scikit-learn) or ``"uniform"`` (U(−0.1, 0.1), Shark);
            ``init_scale`` overrides the 0.01 / 0.1.
        device: ``None``/``"cpu"``, ``"cuda"``, ``"auto"`` or a ``torch.device``.
        dtype: floating dtype of the parameters (float32 by default).
        random_state: int seed (or None for a random one) of the ``torch.Generator`` used for
            initialisation, shuffling and sampling.
        verbose: progress bar over epochs in ``fit``; ``None`` shows it only on a terminal.

    Fitted attributes: ``weights_`` (n_hidden, n_visible), same layout as scikit-learn's
    ``components_``; ``visible_bias_`` (n_visible,) and ``hidden_bias_`` (n_hidden,) (its
    ``intercept_visible_``/``intercept_hidden_``); ``persistent_chain_`` (n_chains, n_visible)
    for PCD; ``n_features_in_``; ``n_iter_`` (epochs run); ``n_updates_``. Methods return torch
    tensors on the model's device; inputs may be numpy arrays or tensors.

    >>> import numpy as np
    >>> X = np.array([[0, 0, 1, 1], [1, 1, 0, 0]] * 5, dtype=float)
    >>> rbm = BernoulliRBM(3, epochs=5, random_state=0).fit(X)
    >>> rbm.transform(X).shape, rbm.weights_.shape
    (torch.Size([10, 3]), torch.Size([3, 4]))
    """

    def __init__(
        self,
        n_hidden: int = 256,
        *,
        method: str = "cd",
        k: int = 1,
        learning_rate: float = 0.1,
        batch_size: int = 10,
        epochs: int = 10,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        n_chains: int | None = None,
        init: str = "normal",
        init_scale: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        random_state: int | None = None,
        verbose: bool | None = None,
    ) -> None:
        self.n_hidden = n_hidden
        self.method = method
        self.k = k
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.epochs = epochs
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.n_chains = n_chains
        self.init = init
        self.init_scale = init_scale
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    def __repr__(self) -> str:
        return (f"BernoulliRBM(n_hidden={self.n_hidden}, method={self.method!r}, k={self.k}, "
                f"learning_rate={self.learning_rate}, batch_size={self.batch_size}, "
                f"epochs={self.epochs})")

    # -- checks ---------------------------------------------------------------------------

    def _check_hyperparameters(self) -> None:
        where = "BernoulliRBM"

        def positive_int(name: str, value: Any) -> None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{where}: {name} must be a positive int, got {value!r}")

        positive_int("n_hidden", self.n_hidden)
        positive_int("batch_size", self.batch_size)
        if not isinstance(self.epochs, int) or isinstance(self.epochs, bool) or self.epochs < 0:
            raise ValueError(f"{where}: epochs must be an int >= 0, got {self.epochs!r}")
        if self.n_chains is not None:
            positive_int("n_chains", self.n_chains)
        if self.method not in ("cd", "pcd"):
            raise ValueError(f"{where}: method must be 'cd' or 'pcd', got {self.method!r}")
        _check_k(self.k, where)
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise ValueError(f"{where}: learning_rate must be > 0, got {self.learning_rate!r}")
        if not (isinstance(self.momentum, (int, float)) and 0 <= self.momentum < 1):
            raise ValueError(f"{where}: momentum must be in [0, 1), got {self.momentum!r}")
        if not (isinstance(self.weight_decay, (int, float)) and self.weight_decay >= 0):
            raise ValueError(f"{where}: weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.init not in ("normal", "uniform"):
            raise ValueError(f"{where}: init must be 'normal' or 'uniform', got {self.init!r}")
        if self.random_state is not None and (not isinstance(self.random_state, int)
                                              or isinstance(self.random_state, bool)):
            raise TypeError(f"{where}: random_state must be an int or None, "
                            f"got {type(self.random_state).__name__} {self.random_state!r}")
        if not (isinstance(self.dtype, torch.dtype) and self.dtype.is_floating_point):
            raise TypeError(f"{where}: dtype must be a floating torch.dtype, got {self.dtype!r}")

    def _check_fitted(self, where: str) -> None:
        if not hasattr(self, "weights_"):
            raise RuntimeError(f"BernoulliRBM.{where}: this model is not fitted yet; "
                               f"call fit or partial_fit first")

    @property
    def _params(self) -> RBMParams:
        return RBMParams(self.weights_, self.visible_bias_, self.hidden_bias_)

    # -- training -------------------------------------------------------------------------

    def _initialize(self, X: torch.Tensor) -> None:
        device = self._device
        gen = torch.Generator(device=device)
        if self.random_state is None:
            gen.seed()
        else:
            gen.manual_seed(int(self.random_state))
        self._generator = gen
        init_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen,
                                                                   device=device)))
        params = init_params(X.shape[1], self.n_hidden, init=self.init, scale=self.init_scale,
                             generator=init_gen, dtype=self.dtype, device=device)
        self.weights_, self.visible_bias_, self.hidden_bias_ = (p.requires_grad_(False)
                                                                for p in params)
        self.n_features_in_ = X.shape[1]
        self.n_iter_ = 0
        self.n_updates_ = 0
        self._velocity = [torch.zeros_like(p) for p in params]
        self._cd_weights: dict[tuple[int, int], torch.Tensor] = {}
        self._visible_sum = torch.zeros(X.shape[1], dtype=torch.float64, device=device)
        self._n_seen = 0
        if self.method == "pcd":
            n_chains = self.n_chains or self.batch_size
            half = torch.full((n_chains, X.shape[1]), 0.5, dtype=self.dtype, device=device)
            self.persistent_chain_ = _bernoulli(half, gen)

    def _update(self, v_data: torch.Tensor) -> None:
        """One CD/PCD update on the mini-batch ``v_data``.

        Called without grad (``_train`` and ``partial_fit`` run it under ``torch.no_grad``) and
        with the parameters requiring grad: only the loss and its gradient are computed with
        grad enabled, so each update switches the grad mode once.
        """
        params = self._params
        # Inputs were validated by fit/partial_fit: the private helpers skip the checks.
        # Sampling builds no graph (grad is off): the loss sees v_model as data.
        start = self.persistent_chain_ if self.method == "pcd" else v_data
        v_model = _gibbs(params, start, self.k, False, self._generator)
        if self.method == "pcd":
            self.persistent_chain_ = v_model
        key = (v_data.shape[0], v_model.shape[0])
        weights = self._cd_weights.get(key)
        if weights is None:  # one vector per pair of batch sizes, not one per update
            weights = self._cd_weights[key] = _cd_weights(*key, v_data)
        with torch.enable_grad():
            grads = torch.autograd.grad(_cd_loss(params, v_data, v_model, weights), params)
        if self.weight_decay:
            grads = (grads[0].add(params.weights, alpha=self.weight_decay), *grads[1:])
        if self.momentum:
            torch._foreach_mul_(self._velocity, self.momentum)
            torch._foreach_add_(self._velocity, grads, alpha=-self.learning_rate)
            torch._foreach_add_(list(params), self._velocity)
        else:
            torch._foreach_add_(list(params), grads, alpha=-self.learning_rate)
        self.n_updates_ += 1

    def _train(self, X: torch.Tensor, epochs: int, progress: bool) -> None:
        from tqdm.auto import tqdm

        self._visible_sum += X.sum(0, dtype=torch.float64)
        self._n_seen += X.shape[0]
        disable = None if self.verbose is None else not self.verbose
        bar = tqdm(range(epochs), desc="BernoulliRBM", unit="epoch",
                   disable=disable if progress else True, leave=False)
        n, bs = X.shape[0], self.batch_size
        for p in self._params:
            p.requires_grad_(True)
        try:
            with torch.no_grad():  # see _update
                for _ in bar:
                    perm = torch.randperm(n, generator=self._generator, device=X.device)
                    for v_batch in X.index_select(0, perm).split(bs):  # X[perm], faster
                        self._update(v_batch)
                    self.n_iter_ += 1
        finally:
            for p in self._params:
                p.requires_grad_(False)
            bar.close()

    def fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """Initialise and train for ``epochs`` passes over ``X`` (n_samples, n_visible), binary.

        ``y`` is ignored. Returns ``self``.
        """
        self._check_hyperparameters()
        self._device = _resolve_device(self.device)
        X = _as_matrix(X, "BernoulliRBM.fit", dtype=self.dtype, device=self._device, binary=True)
        self._initialize(X)
        self._train(X, self.epochs, progress=True)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """One update with ``X`` as the mini-batch (initialising on the first call), like
        scikit-learn's ``partial_fit``. Returns ``self``."""
        if not hasattr(self, "weights_"):
            self._check_hyperparameters()
            self._device = _resolve_device(self.device)
            X = _as_matrix(X, "BernoulliRBM.partial_fit", dtype=self.dtype, device=self._device,
                           binary=True)
            self._initialize(X)
        else:
            X = _as_matrix(X, "BernoulliRBM.partial_fit", dtype=self.dtype, device=self._device,
                           binary=True, n_features=self.n_features_in_)
        self._visible_sum += X.sum(0, dtype=torch.float64)
        self._n_seen += X.shape[0]
        params = self._params
        for p in params:
            p.requires_grad_(True)
        try:
            with torch.no_grad():  # see _update
                self._update(X)
        finally:
            for p in params:
                p.requires_grad_(False)
        return self

    # -- inference ------------------------------------------------------------------------

    def transform(self, X: Any) -> torch.Tensor:
        """Hidden probabilities ``P(h=1|v=X)`` (n_samples, n_hidden); ``X`` values in [0, 1]."""
        self._check_fitted("transform")
        X = _as_matrix(X, "BernoulliRBM.transform", dtype=self.dtype, device=self._device,
                       binary=False, n_features=self.n_features_in_)
        with torch.no_grad():
            return torch.sigmoid(F.linear(X, self.weights_, self.hidden_bias_))

    def fit_transform(self, X: Any, y: Any = None) -> torch.Tensor:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X).transform(X)

    def sample(self, n_samples: int = 1, *, n_steps: int = 1000,
               v_init: Any = None) -> torch.Tensor:
        """Binary samples (n_samples, n_visible) after ``n_steps`` Gibbs steps.

        Chains start at ``v_init`` (binary, (n_samples, n_visible)) or at uniform random states.
        """
        self._check_fitted("sample")
        if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
            raise ValueError(f"BernoulliRBM.sample: n_steps must be an int >= 1, got {n_steps!r}")
        if v_init is None:
            if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 1:
                raise ValueError(f"BernoulliRBM.sample: n_samples must be a positive int, "
                                 f"got {n_samples!r}")
            half = torch.full((n_samples, self.n_features_in_), 0.5, dtype=self.dtype,
                              device=self._device)
            v = _bernoulli(half, self._generator)
        else:
            v = _as_matrix(v_init, "BernoulliRBM.sample", dtype=self.dtype, device=self._device,
                           binary=True, n_features=self.n_features_in_)
        with torch.no_grad():
            return gibbs_chain(self._params, v, n_steps, generator=self._generator)

    def score_samples(self, X: Any) -> torch.Tensor:
        """Pseudo-log-likelihood per sample (scikit-learn's formula, one random bit flipped).

        Random: with an int ``random_state`` the flipped units are drawn from a generator
        seeded with it on every call (same answer each call, as in scikit-learn), otherwise from
        the model's generator. See :func:`pseudo_log_likelihood`.
        """
        self._check_fitted("score_samples")
        X = _as_matrix(X, "BernoulliRBM.score_samples", dtype=self.dtype, device=self._device,
                       binary=True, n_features=self.n_features_in_)
        gen = (torch.Generator().manual_seed(int(self.random_state))
               if self.random_state is not None else None)
        with torch.no_grad():
            return pseudo_log_likelihood(self._params, X, generator=gen)

    def log_likelihood(self, X: Any, *, method: str = "auto", n_runs: int = 100,
                       betas: int | torch.Tensor = 14500) -> torch.Tensor:
        """``log p(v)`` per sample (float64), exact or by AIS.

        ``method="auto"``: exact (:func:`exact_log_partition`) when
        ``min(n_visible, n_hidden) <= 20``, else AIS (:func:`ais_log_partition` with the
        base-rate model of the training data, ``n_runs`` runs and ``betas`` temperatures). The
        log-partition used and, for AIS, its standard error are kept in ``log_partition_`` and
        ``log_partition_stderr_`` (0.0 when exact).
        """
        self._check_fitted("log_likelihood")
        if method not in ("auto", "exact", "ais"):
            raise ValueError(f"BernoulliRBM.log_likelihood: method must be 'auto', 'exact' or "
                             f"'ais', got {method!r}")
        X = _as_matrix(X, "BernoulliRBM.log_likelihood", dtype=torch.float64,
                       device=self._device, binary=True, n_features=self.n_features_in_)
        params = RBMParams(*(p.to(torch.float64) for p in self._params))
        if method == "auto":
            method = "exact" if min(self.weights_.shape) <= MAX_EXACT_UNITS else "ais"
        with torch.no_grad():
            if method == "exact":
                log_z, stderr = exact_log_partition(params), torch.tensor(0.0)
            else:
                # Base-rate model of the training data (smoothed means, as in ais_log_partition).
                mean = (self._visible_sum + 1) / (self._n_seen + 2)
                result = ais_log_partition(params, base_visible_bias=torch.logit(mean),
                                           n_runs=n_runs, betas=betas, generator=self._generator)
                log_z, stderr = result.log_partition, result.stderr
            self.log_partition_ = float(log_z)
            self.log_partition_stderr_ = float(stderr)
            return log_likelihood(params, X, log_partition=log_z)
