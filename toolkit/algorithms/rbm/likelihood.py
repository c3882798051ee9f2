"""Likelihoods of a Bernoulli RBM: exact log Z, annealed importance sampling, pseudo-likelihood.

:func:`exact_log_partition` enumerates the smaller layer; :func:`ais_log_partition` estimates
``log Z`` by annealed importance sampling (Salakhutdinov & Murray 2008); :func:`log_likelihood`
and :func:`exact_log_likelihood_gradient` build on the exact one; :func:`pseudo_log_likelihood`
is the sum over all units that scikit-learn's ``score_samples`` estimates with one random unit.

References:
    R. Salakhutdinov and I. Murray (2008), "On the quantitative analysis of deep belief
    networks", ICML. https://doi.org/10.1145/1390156.1390266
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from toolkit._utils.array_validation import as_tensor
from toolkit._utils.param_validation import Generator, Integer, check, is_int
from toolkit.algorithms.rbm.core import (
    RBMParams,
    bernoulli,
    check_layer,
    check_rbm_params,
    free_energy,
)

__all__ = [
    "MAX_EXACT_UNITS",
    "AISResult",
    "ais_log_partition",
    "exact_log_likelihood_gradient",
    "exact_log_partition",
    "log_likelihood",
    "pseudo_log_likelihood",
]

#: Largest layer size that :func:`exact_log_partition` enumerates (2**20 configurations).
MAX_EXACT_UNITS = 20

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
    The smaller layer may have at most ``MAX_EXACT_UNITS = 20`` units. Nothing cancels: in
    float32 the result is within a few ``u·|log Z|`` (``u`` = 6e-8; measured: at most 1.3) of
    float64 on the same numbers, so a likelihood ``−F(v) − log Z`` keeps about
    ``u·(|v·b| + Σ_j softplus(a_j) + |log Z|)``: 6e-5 nats at ``log Z`` = 385. Use float64
    where that matters.

    >>> p = RBMParams(torch.zeros(2, 3), torch.zeros(3), torch.zeros(2))
    >>> round(float(exact_log_partition(p)), 4) == round(5 * math.log(2), 4)
    True
    """
    params = check_rbm_params(params, "exact_log_partition")
    W = params.weights
    n_hidden, n_visible = W.shape
    hidden = n_hidden <= n_visible
    n_small, n_other = (n_hidden, n_visible) if hidden else (n_visible, n_hidden)
    if n_small > MAX_EXACT_UNITS:
        raise ValueError(f"exact_log_partition: the smaller layer must have at most "
                         f"{MAX_EXACT_UNITS} units to enumerate, got {n_small} "
                         f"(n_visible={n_visible}, n_hidden={n_hidden}); use ais_log_partition")
    check("exact_log_partition", "chunk_elements", chunk_elements, [Integer(1)])
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
    params = check_rbm_params(params, "log_likelihood")
    check_layer(v, params.weights.shape[1], "log_likelihood", "v", like=params.weights)
    log_z = exact_log_partition(params) if log_partition is None else log_partition
    return -free_energy(params, v) - log_z


def exact_log_likelihood_gradient(params: RBMParams, v_data: torch.Tensor) -> RBMParams:
    """Gradient of the mean negative log-likelihood ``−mean log p(v_data)`` (exact).

    Equals ``−(⟨h vᵀ⟩_data − ⟨h vᵀ⟩_model)`` etc.; computed by autograd through
    :func:`exact_log_partition` (the model expectations by enumeration of the smaller layer).
    Same sign convention as :func:`cd_loss`'s gradient.
    """
    params = check_rbm_params(params, "exact_log_likelihood_gradient")
    check_layer(v_data, params.weights.shape[1], "exact_log_likelihood_gradient", "v_data",
                like=params.weights)
    # Fresh leaves (copies made without a graph), so the caller's tensors and .grad are untouched.
    with torch.no_grad():
        copies = [t.clone() for t in params]
    with torch.enable_grad():
        leaves = RBMParams(*(t.requires_grad_(True) for t in copies))
        nll = -log_likelihood(leaves, v_data).mean()
        grads = torch.autograd.grad(nll, list(leaves))
    return RBMParams(*grads)


def _flip_steps(a: torch.Tensor, delta: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``Σ_j [softplus(a_j + δ_u w_uj) − softplus(a_j)]`` for each row and flip ``u``, (m, U),
    without the cancellation of the two softplus values.

    ``a`` (m, H): hidden pre-activations; ``delta`` (m, U): the flips' changes of their visible
    units; ``w`` (U, H), or (m, U, H) for flips that differ by row: those units' weights. For
    ``a_j > 0`` it uses ``softplus(x) = x + softplus(−x)``: the term is ``d + softplus(−(a_j +
    d)) − softplus(−a_j)`` (``d = δ_u w_uj``), where ``d`` is exact and the two softplus values
    are small unless ``a_j + d < 0``, in which case ``|a_j + d| ≤ |d|``; for ``a_j ≤ 0`` both
    values are at most ``softplus(d)`` above zero. Either way a term's rounding error is about
    ``u·(|d| + 1)``, not ``u·|a_j|`` (the term is at most ``|d|``: softplus is 1-Lipschitz).
    With ``s_j = ∓1`` (``a_j > 0`` or not) the sum is ``Σ_j softplus(s_j (a_j + δ_u w_uj)) −
    Σ_j softplus(s_j a_j) + δ_u Σ_{j: a_j > 0} w_uj``; the last sum is a product, and the
    (m, U, H) tensor takes two passes.
    """
    positive = a > 0
    sign = torch.where(positive, -1.0, 1.0).to(a.dtype)
    sa = sign * a
    t = torch.addcmul(sa.unsqueeze(1), delta.unsqueeze(2), sign.unsqueeze(1) * w)  # (m, U, H)
    linear = torch.matmul(positive.to(a.dtype).unsqueeze(1), w.mT).squeeze(1)  # (m, U)
    return F.softplus(t).sum(2) - F.softplus(sa).sum(1, keepdim=True) + delta * linear


def pseudo_log_likelihood(
    params: RBMParams,
    v: torch.Tensor,
    *,
    indices: torch.Tensor | None = None,
    chunk_elements: int = 2**22,
) -> torch.Tensor:
    """Pseudo-log-likelihood per sample ``Σ_i log P(v_i | v_{−i})``, summed over every unit.

    Flipping unit ``i`` of ``v`` gives ``ṽ``; for binary ``v``,
    ``log P(v_i | v_{−i}) = log σ(F(ṽ) − F(v))``. The sum over all ``V = n_visible`` units is
    deterministic. scikit-learn's ``BernoulliRBM.score_samples`` flips one unit per row drawn
    at random and returns ``V · log σ(F(ṽ) − F(v))``, an unbiased estimate of this sum; pass
    ``indices`` (one unit per row) to get that estimate at those units. ``v`` (n_samples,
    n_visible), values in [0, 1] (a fractional ``v_i`` flips to ``1 − v_i``, as in
    scikit-learn); returns (n_samples,).

    Precision: each ``softplus(a_j + d) − softplus(a_j)`` (``d = δ_i W_ji``) is computed without
    forming the two softplus values (:func:`_flip_steps`), so its error is about ``u·(|d| + 1)``
    (``u`` the unit roundoff: 6e-8 in float32) where the difference of the two values loses
    ``u·|a_j|``; a pre-activation of 50, common in a trained model, made float32 results ~50x less
    accurate that way. The result is within about ``u · Σ_i Σ_j (|W_ji| + 1)`` of the exact sum.

    Cost: the flips change the hidden pre-activations ``a = c + v Wᵀ`` by ``(1 − 2v_i) W_{:,i}``,
    so the sum takes an (n_samples, V, H) tensor, computed in chunks of about
    ``chunk_elements`` entries; each row is computed on its own (the result of a row does not
    depend on the other rows).

    >>> p = RBMParams(torch.zeros(2, 3), torch.zeros(3), torch.zeros(2))
    >>> round(float(pseudo_log_likelihood(p, torch.ones(1, 3))), 3)  # 3 · log(1/2)
    -2.079

    Reference: scikit-learn ``BernoulliRBM.score_samples``
    (https://scikit-learn.org/stable/modules/generated/sklearn.neural_network.BernoulliRBM.html).
    """
    where = "pseudo_log_likelihood"
    params = check_rbm_params(params, where)
    W, b, c = params
    n_hidden, n_visible = W.shape
    check_layer(v, n_visible, where, "v", like=params.weights)
    n = v.shape[0]
    if indices is not None:
        indices = torch.as_tensor(indices, device=v.device)
        if indices.shape != (n,) or (n and (indices.min() < 0 or indices.max() >= n_visible)):
            raise ValueError(f"{where}: indices must be {n} ints in [0, {n_visible}), got "
                             f"shape {tuple(indices.shape)}")
        rows = torch.arange(n, device=v.device)
        delta = 1 - 2 * v[rows, indices]  # (n,): v_i → 1 − v_i at the flipped unit
        a = F.linear(v, W, c)  # (n, H)
        steps = _flip_steps(a, delta[:, None], W.T[indices].unsqueeze(1))[:, 0]
        diff = -(delta * b[indices]) - steps
        return -n_visible * F.softplus(-diff)
    check(where, "chunk_elements", chunk_elements, [Integer(1)])
    step = max(1, chunk_elements // max(1, n_visible * n_hidden))
    parts = []
    for vc in v.split(step):
        a = F.linear(vc, W, c)                                   # (m, H)
        delta = 1 - 2 * vc                                       # (m, V): v_i → 1 − v_i
        # F(ṽ_i) − F(v) = −b_i δ_i − Σ_j [softplus(a_j + δ_i W_ji) − softplus(a_j)]
        steps = _flip_steps(a, delta, W.T)                       # (m, V)
        diff = -(delta * b) - steps
        parts.append(-F.softplus(-diff).sum(1))                  # Σ_i log σ(ΔF_i)
    return torch.cat(parts) if parts else v.new_zeros(0)


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
    params = check_rbm_params(params, "ais_log_partition")
    check("ais_log_partition", "n_runs", n_runs, [Integer(2)])
    check("ais_log_partition", "generator", generator, [None, Generator])
    W, b, c = (t.to(torch.float64) for t in params)
    device = W.device
    n_hidden, n_visible = W.shape
    if is_int(betas):
        betas = int(check("ais_log_partition", "betas", betas, [Integer(3)]))
        n1 = max(1, round(betas * 500 / 14500))
        n2 = max(1, round(betas * 4000 / 14500))
        n3 = max(1, betas - n1 - n2)
        beta_list = torch.cat([torch.linspace(0, 0.5, n1 + 1, dtype=torch.float64)[:-1],
                               torch.linspace(0.5, 0.9, n2 + 1, dtype=torch.float64)[:-1],
                               torch.linspace(0.9, 1.0, n3, dtype=torch.float64)])
    else:
        beta_list = as_tensor(betas, where="ais_log_partition", arg="betas",
                              dtype=torch.float64, device="cpu")
        if (beta_list.dim() != 1 or beta_list.numel() < 2 or beta_list[0] != 0
                or beta_list[-1] != 1 or (beta_list.diff() <= 0).any()):
            raise ValueError("ais_log_partition: betas must be an int or an increasing 1-D "
                             "sequence from 0 to 1")
    if data is not None and base_visible_bias is not None:
        raise ValueError("ais_log_partition: give data or base_visible_bias, not both")
    if base_visible_bias is not None:
        b_a = as_tensor(base_visible_bias, where="ais_log_partition", arg="base_visible_bias",
                        dtype=torch.float64, device=device)
        if b_a.shape != (n_visible,) or not bool(torch.isfinite(b_a).all()):
            raise ValueError(f"ais_log_partition: base_visible_bias must be {n_visible} finite "
                             f"numbers, got shape {tuple(b_a.shape)}")
    elif data is None:
        b_a = torch.zeros(n_visible, dtype=torch.float64, device=device)
    else:
        check_layer(data, n_visible, "ais_log_partition", "data")
        # Smoothed data means (as if each pixel had been seen on and off once more).
        mean = (data.to(torch.float64).sum(0) + 1) / (data.shape[0] + 2)
        b_a = torch.logit(mean).to(device)
    log_z_a = F.softplus(b_a).sum() + n_hidden * math.log(2)
    betas_l = beta_list.tolist()
    with torch.no_grad():
        v = bernoulli(torch.sigmoid(b_a).expand(n_runs, n_visible).contiguous(), generator)
        log_w = torch.zeros(n_runs, dtype=torch.float64, device=device)
        for k in range(1, len(betas_l)):
            beta, prev = betas_l[k], betas_l[k - 1]
            act = torch.addmm(c, v, W.T)  # (M, H)
            # log p*_β(v) − log p*_β'(v); the visible terms are linear in β.
            log_w += (beta - prev) * (v @ (b - b_a))
            log_w += (F.softplus(beta * act) - F.softplus(prev * act)).sum(1)
            if k < len(betas_l) - 1:
                h = bernoulli(torch.sigmoid(beta * act), generator)
                v = bernoulli(torch.sigmoid((1 - beta) * b_a + beta * torch.addmm(b, h, W)),
                              generator)
        log_mean_w = torch.logsumexp(log_w, 0) - math.log(n_runs)
        r = torch.exp(log_w - log_w.max())
        stderr = r.std() / (math.sqrt(n_runs) * r.mean())
    return AISResult(log_z_a + log_mean_w, stderr, log_w)
