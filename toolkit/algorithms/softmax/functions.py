"""Softmax, log-softmax and log-sum-exp with the max-shift behind a named ``stop_gradient``.

The textbook ``exp(x) / Σ exp(x)`` overflows as soon as a logit passes ``log(finfo.max)``
(≈ 88.72 in float32, ≈ 11.09 in float16). Every stable implementation shifts first::

    z = x - stop_gradient(max(x))          # the one block of this module: "softmax.max"
    softmax(x) = exp(z) / Σ exp(z),   log_softmax(x) = z - log Σ exp(z),
    logsumexp(x) = log Σ exp(z) + stop_gradient(max(x))

Softmax is shift-invariant (``softmax(x - c) = softmax(x)`` for any ``c`` constant along the
reduced dimensions), so in exact arithmetic the gradient that flows through ``max`` is zero. The
block says so to autograd: the backward graph loses the ``max`` branch (its reduction, the
tie-splitting mask of ``amax``'s backward and the broadcast subtraction), and tied maxima never
have to share a gradient. Inside ``disable_blocks("softmax.*")`` the same code lets the gradient
through ``max`` and the result is the same up to rounding (see ``experiments/softmax_gradients``).

The stable functions share one private helper, :func:`_shifted`, which holds the module's single
cut: ``m = as_constant(<row max>, name=BLOCK)``, no graph for the max while the block is active,
the graph kept inside ``disable_blocks``. The fused paths (``impl="fused"``) have an analytic
backward with no path through the max, so they refuse to run without the block
(``require_block``) rather than silently ignore the switch. ``naive_softmax`` (no shift, for
comparison) has no block.

Conventions of the stable functions:

- ``dim``: an int or a tuple of ints; the reduction runs over all of them at once.
- ``where``: boolean mask broadcastable to ``x``; ``False`` entries are left out (probability 0,
  log-probability ``-inf``, no contribution to the sum) and receive a zero gradient, whatever
  value ``x`` holds there (even ``nan``/``inf``).
- A row (slice along ``dim``) with nothing left in it, because it is fully masked or all
  ``-inf``, gives softmax 0, log-softmax ``-inf`` and logsumexp ``-inf``, with finite (zero)
  gradients. ``torch.softmax`` returns ``nan`` for an all ``-inf`` row; here such a row behaves
  like a fully masked one, which is what attention masks built with ``-inf`` expect.
- ``+inf`` in a row: softmax and log-softmax of that row are ``nan`` (as ``torch.softmax`` and
  ``jax.nn.softmax``: the limit depends on how the entries grow, so no value is right);
  logsumexp is ``+inf`` (as ``torch.logsumexp`` and ``scipy.special.logsumexp``).
- ``nan`` anywhere in a row propagates to the whole row.
- ``dtype``: cast ``x`` to it first, like ``torch.softmax(x, dim, dtype=...)``: pass
  ``dtype=torch.float32`` to compute float16/bfloat16 inputs in float32 (the result is float32).
- Inputs may be tensors or anything ``torch.as_tensor`` accepts; results are tensors.

References:
    - Blanchard, Higham, Higham (2021), "Accurately computing the log-sum-exp and softmax
      functions", IMA J. Numer. Anal. 41(4). https://doi.org/10.1093/imanum/draa038
    - JAX ``jax.nn.softmax`` / ``log_softmax`` (shift by ``stop_gradient(max)``).
      https://jax.readthedocs.io/en/latest/_autosummary/jax.nn.softmax.html
    - ``scipy.special.logsumexp`` (weights ``b``, ``return_sign``).
      https://docs.scipy.org/doc/scipy/reference/generated/scipy.special.logsumexp.html
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch

from toolkit._utils.array_validation import check_storage
from toolkit._utils.param_validation import Bool, Options, check
from toolkit.algorithms.softmax.inputs import as_float_tensor, check_dims, check_mask, prepare
from toolkit.core import as_constant, is_compiling, require_block

__all__ = ["BLOCK", "log_softmax", "logsumexp", "naive_softmax", "stable_softmax"]

#: The module's one block. Softmax is shift-invariant (softmax(x - c) = softmax(x) for any c
#: constant along the reduced dims), so the gradient through the shift ``max(x)`` is zero in
#: exact arithmetic: the max is a constant, computed without a graph.
BLOCK = "softmax.max"

Dim = int | Sequence[int]
Impl = Literal["reference", "fused"]
_IMPLS = Options("reference", "fused")


# --------------------------------------------------------------------------------------------
# the shared core


def _row_max(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    m = x.amax(dim=dims, keepdim=True)
    return m.masked_fill(m == -math.inf, 0.0)


def _shifted(x: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x - m, m)`` with ``m = max(x)`` over ``dims`` (kept as size-1 dims), behind the block.

    ``amax`` rather than ``max``: no indices are computed, several dims reduce at once, and
    without the block its backward splits the gradient evenly among tied maxima. Rows whose max
    is ``-inf`` (empty after masking) are shifted by 0, so that ``x - m`` is ``-inf`` there and
    not ``nan``; a ``+inf`` max is kept, which makes the row ``nan`` in softmax (documented).
    """
    # The one cut: with the block active the max is computed as a constant (no graph: saves the
    # Amax node and its reference to x); inside disable_blocks("softmax.max") its graph is kept.
    m = as_constant(_row_max, x, dims, name=BLOCK)
    return torch.sub(x, m), m


#: Inputs larger than twice this many elements are processed in slabs of about this size.
SLAB_ELEMENTS = 1 << 20


def _in_slabs(fn: Any, x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """``fn(x)`` for a row-wise ``fn``, computed slab by slab along a dimension it does not reduce.

    Each row's numbers are exactly those of ``fn(x)``: the slabs only split the batch of rows.
    What changes is memory traffic: with slabs of about ``SLAB_ELEMENTS`` elements (4 MiB of
    float32) the intermediates of the composition stay in cache, and the allocator recycles
    their memory instead of mapping fresh pages for every full-size temporary. Forward and
    backward then allocate only two full-size tensors (the output, by ``cat``, and the input's
    gradient, by ``split``'s backward), as ``torch.softmax`` does. Under ``torch.compile`` the
    compiler fuses the composition itself, and off the CPU each slab would only add kernel
    launches, so there the input is passed whole.
    """
    if x.device.type != "cpu" or x.numel() <= 2 * SLAB_ELEMENTS or is_compiling():
        return fn(x)
    free = [d for d in range(x.ndim) if d not in dims and x.shape[d] > 1]
    if not free:
        return fn(x)
    d = free[0]
    n_slabs = min(x.shape[d], -(-x.numel() // SLAB_ELEMENTS))
    size = -(-x.shape[d] // n_slabs)
    return torch.cat([fn(part) for part in x.split(size, dim=d)], dim=d)


def _row_sums(e: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """``Σ e`` over ``dims`` (kept as size-1 dims), with 1 in place of 0.

    ``e = exp(x - max)`` sums to at least 1 unless the row is empty (every entry ``-inf``, sum
    0). Using 1 there keeps such a row at 0 in softmax and ``-inf`` in log-softmax, with zero
    gradients, instead of ``0/0`` and ``log 0``.
    """
    s = e.sum(dim=dims, keepdim=True)
    return s.masked_fill(s == 0, 1.0)


def _softmax_ref(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """Reference composition ``e^z · (1 / Σ e^z)``.

    One exponential, taken in place on ``z`` (``sub`` saves nothing for backward and ``exp``
    saves its output, so nothing else needs ``z``); the normalisation is a broadcast product
    with the reciprocal of the row sums, whose gradient is the row reduction of ``g ⊙ e^z``.
    Forward allocates two full-size tensors (``z``, then the output).
    """
    z, _ = _shifted(x, dims)
    e = z.exp_()
    return e * _row_sums(e, dims).reciprocal()


def _log_softmax_ref(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """Reference composition; returns a fresh tensor that the caller may modify in place.

    ``log_softmax = z + c`` with ``c = -log Σ exp(z)``. The normalisation enters additively, so
    its gradient is a plain reduction of the incoming gradient (no full-size temporary), and the
    ``+ c`` runs in place on ``z`` (nothing saved ``z`` for backward: ``sub`` saves nothing and
    ``exp`` saves its output). Forward allocates two full-size tensors (``z`` and ``exp(z)``).
    """
    z, _ = _shifted(x, dims)
    return z.add_(_row_sums(torch.exp(z), dims).log().neg_())


def _require_max_block(where: str) -> None:
    """The fused paths cannot run without the block: refuse inside ``disable_blocks``."""
    require_block(BLOCK, where=f"{where}(impl='fused')",
                  why="its analytic backward has no path through the max; use "
                      "impl='reference' to differentiate through it")


class _FusedSoftmax(torch.autograd.Function):
    """Softmax with the analytic backward ``dx = y ⊙ (g − Σ y ⊙ g)``: one full-size allocation
    in each direction, like ``torch.softmax``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
        # no graph is recorded here, so everything runs in place on one fresh tensor
        e, _ = _shifted(x, dims)
        e.exp_()
        y = e.div_(_row_sums(e, dims))  # empty rows: 0 / 1
        ctx.dims = dims
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (y,) = ctx.saved_tensors
        gy = g * y
        dot = gy.sum(dim=ctx.dims, keepdim=True)
        return gy.addcmul_(y, dot, value=-1), None


class _FusedLogSoftmax(torch.autograd.Function):
    """Log-softmax with the analytic backward ``dx = g − softmax(x) Σ g``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
        out = _log_softmax_ref(x, dims)
        ctx.dims = dims
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (out,) = ctx.saved_tensors
        total = g.sum(dim=ctx.dims, keepdim=True)
        if torch.is_grad_enabled():  # create_graph=True: exp saves its output, keep it intact
            return g - torch.exp(out) * total, None
        return torch.exp(out).mul_(total.neg()).add_(g), None


# --------------------------------------------------------------------------------------------
# public functions


def naive_softmax(x: Any, dim: Dim = -1, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    r"""Softmax straight from the definition, without the max shift (overflows; for comparison).

    .. math:: \operatorname{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}

    ``exp`` overflows to ``inf`` once a logit exceeds ``log(finfo(dtype).max)`` (≈ 709.8 in
    float64, ≈ 88.72 in float32 and bfloat16, ≈ 11.09 in float16), and the row becomes
    ``inf / inf = nan``; very negative rows underflow to ``0 / 0 = nan``. Use
    :func:`stable_softmax`.

    Args:
        x: logits, any shape.
        dim: dimension(s) to normalise over.
        dtype: cast ``x`` to this dtype first.

    Returns:
        Tensor of ``x``'s shape (and ``dtype`` if given).

    >>> import torch
    >>> naive_softmax(torch.tensor([0.0, 1.0, 2.0]))
    tensor([0.0900, 0.2447, 0.6652])
    >>> naive_softmax(torch.tensor([0.0, 100.0]))  # float32: exp(100) = inf
    tensor([0., nan])
    """
    x = as_float_tensor(x, dtype, where="naive_softmax")
    dims = check_dims(dim, x.ndim, x.shape, where="naive_softmax")
    e = torch.exp(x)
    return e / e.sum(dim=dims, keepdim=True)


def stable_softmax(
    x: Any,
    dim: Dim = -1,
    *,
    where: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    impl: Impl = "reference",
) -> torch.Tensor:
    r"""Softmax computed on ``z = x - stop_gradient(max x)``, the block named ``"softmax.max"``.

    .. math::
        \operatorname{softmax}(x)_i = \frac{e^{z_i}}{\sum_j e^{z_j}}
        = \exp\Big(z_i - \log \sum_j e^{z_j}\Big), \qquad z = x - \max_j x_j

    and its vector-Jacobian product, for an incoming gradient ``g``,
    ``∂L/∂x = y ⊙ (g − Σ_j y_j g_j)`` (Jacobian ``diag(y) − y yᵀ``). Every ``e^{z_j} <= 1`` and
    the largest is exactly 1, so nothing overflows and the sum is at least 1.

    Args:
        x: logits, any shape (tensor or array-like).
        dim: dimension(s) to normalise over: an int or a tuple of ints.
        where: optional boolean mask broadcastable to ``x``; ``False`` entries get probability 0
            and zero gradient; a fully masked row is all zeros (see the module notes).
        dtype: cast ``x`` to this dtype first (e.g. ``torch.float32`` for float16 inputs).
        impl: ``"reference"`` (default) composes autograd primitives, so the ``softmax.max``
            block is part of the graph and can be switched off with ``disable_blocks``.
            ``"fused"`` is a ``torch.autograd.Function`` with the analytic backward above: the
            same forward, one full-size allocation in each direction and no graph through the
            max at all, so it cannot run without the block: inside
            ``disable_blocks("softmax.max")`` it raises ``BlockNotSwitchableError``.

    Returns:
        Probabilities of ``x``'s shape, summing to 1 along ``dim`` (0 for empty rows).

    Numerical notes: the reference form computes ``e^z · (1 / Σ e^z)`` (one exponential; the
    product rounds once more than a division would, so it agrees with ``torch.softmax`` to a
    few ulp). Inputs of more than 2M elements are processed in slabs of rows, which changes
    no number (see ``_in_slabs``). ``+inf`` in a row makes the row ``nan`` (as
    ``torch.softmax``); an all ``-inf`` row gives zeros (``torch``: ``nan``).

    >>> import torch
    >>> stable_softmax(torch.tensor([0.0, 1.0, 2.0]))
    tensor([0.0900, 0.2447, 0.6652])
    >>> [f"{p:.3g}" for p in stable_softmax(torch.tensor([0.0, 100.0]))]  # naive: nan here
    ['3.78e-44', '1']
    >>> stable_softmax(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), dim=(0, 1)).sum()
    tensor(1.)
    >>> stable_softmax(torch.tensor([1.0, 5.0, 2.0]), where=torch.tensor([True, False, True]))
    tensor([0.2689, 0.0000, 0.7311])
    """
    check("stable_softmax", "impl", impl, [_IMPLS])
    x, dims = prepare(x, dim, where, dtype, name="stable_softmax")
    if impl == "fused":
        _require_max_block("stable_softmax")
        return _FusedSoftmax.apply(x, dims)
    return _in_slabs(lambda part: _softmax_ref(part, dims), x, dims)


def log_softmax(
    x: Any,
    dim: Dim = -1,
    *,
    where: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    impl: Impl = "reference",
) -> torch.Tensor:
    r"""Log-softmax ``z − log Σ exp(z)`` with ``z = x − stop_gradient(max x)`` ("softmax.max").

    .. math::
        \log\operatorname{softmax}(x)_i = z_i - \log \sum_j e^{z_j}, \qquad z = x - \max_j x_j

    Vector-Jacobian product: ``∂L/∂x = g − softmax(x) Σ_j g_j``.

    Args and conventions as in :func:`stable_softmax`: masked entries (``where`` False) are
    ``-inf`` with zero gradient, a fully masked (or all ``-inf``) row is all ``-inf`` with
    finite gradients, ``+inf`` in a row makes the row ``nan``. ``impl="fused"`` uses the
    analytic backward above (and raises ``BlockNotSwitchableError`` inside
    ``disable_blocks("softmax.max")``).

    Returns:
        Tensor of ``x``'s shape.

    >>> import torch
    >>> [round(v, 3) for v in log_softmax(torch.tensor([0.0, 1.0, 2.0])).tolist()]
    [-2.408, -1.408, -0.408]
    >>> log_softmax(torch.tensor([0.0, 1000.0]))
    tensor([-1000.,     0.])
    """
    check("log_softmax", "impl", impl, [_IMPLS])
    x, dims = prepare(x, dim, where, dtype, name="log_softmax")
    if impl == "fused":
        _require_max_block("log_softmax")
        return _FusedLogSoftmax.apply(x, dims)
    return _in_slabs(lambda part: _log_softmax_ref(part, dims), x, dims)


def logsumexp(
    x: Any,
    dim: Dim = -1,
    *,
    keepdim: bool = False,
    b: Any = None,
    return_sign: bool = False,
    where: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""``log Σ b·exp(x)`` along ``dim``, computed as ``log Σ b·exp(z) + m`` (``m`` blocked).

    .. math::
        \operatorname{LSE}(x) = m + \log \sum_j b_j e^{x_j - m},
        \qquad m = \operatorname{stop\_gradient}(\max_j x_j)

    The value does not depend on ``m``, so treating ``m`` as a constant in *both* places gives
    the exact gradient ``∂LSE/∂x_j = b_j e^{x_j} / Σ_k b_k e^{x_k}`` (softmax when ``b`` is
    None).

    Weights ``b`` follow ``scipy.special.logsumexp``: ``b`` broadcasts with ``x`` (the result
    has the broadcast shape with ``dim`` reduced), entries with ``b == 0`` are left out
    entirely (even if ``x`` is ``inf``/``nan`` there; also out of the max, and their gradient
    with respect to ``b`` is 0), and ``b`` may be negative. A negative sum gives ``nan``, or,
    with ``return_sign=True``, the pair ``(log|Σ b e^x|, sign)`` with sign in {−1, 0, +1}.

    Edge cases: an empty row (fully masked, all ``b == 0`` or all ``-inf``) gives ``-inf`` with
    zero gradient; a row holding ``+inf`` gives ``+inf`` (``nan`` if the weights of its
    ``+inf`` entries sum to a negative number or to zero; with ``return_sign``, their sign).

    Args:
        x: values, any shape (tensor or array-like).
        dim: dimension(s) to reduce: an int or a tuple of ints (of the broadcast shape).
        keepdim: keep the reduced dimensions with size 1.
        b: optional weights, broadcastable with ``x``; may require grad.
        return_sign: return ``(log|sum|, sign)`` instead of ``nan`` for negative sums.
        where: optional boolean mask broadcastable to ``x``; ``False`` entries are left out.
        dtype: cast ``x`` (and ``b``) to this dtype first.

    Returns:
        ``x``'s (broadcast) shape with ``dim`` reduced, or the pair with ``return_sign``.

    >>> import torch
    >>> round(float(logsumexp(torch.tensor([1.0, 2.0, 3.0]))), 3)
    3.408
    >>> round(float(logsumexp(torch.tensor([1000.0, 1000.0]))) - 1000, 4)  # 1000 + log 2
    0.6932
    >>> out = logsumexp(torch.tensor([1.0, 2.0]), b=torch.tensor([1.0, -1.0]), return_sign=True)
    >>> [round(float(t), 3) for t in out]
    [1.541, -1.0]
    """
    name = "logsumexp"
    x = as_float_tensor(x, dtype, where=name)
    check(name, "keepdim", keepdim, [Bool])
    check(name, "return_sign", return_sign, [Bool])
    if b is not None:
        b = as_float_tensor(b, dtype if dtype is not None else x.dtype, where=name, arg="b")
        check_storage(name, "b", b, allow_meta=x.device.type == "meta")  # values to copy
        b = b.to(x.device)
        try:
            shape = torch.broadcast_shapes(x.shape, b.shape)
        except RuntimeError as err:
            raise ValueError(f"{name}: b of shape {tuple(b.shape)} does not broadcast with x of "
                             f"shape {tuple(x.shape)}") from err
        x, b = x.expand(shape), b.expand(shape)
    dims = check_dims(dim, x.ndim, x.shape, where=name)
    keep = None
    if where is not None:
        keep = check_mask(where, x.shape, x.device, where=name)
    if b is not None:
        keep = (b != 0) if keep is None else keep & (b != 0)
    if keep is not None:
        x = x.masked_fill(~keep, -math.inf)

    z, m = _shifted(x, dims)
    e = torch.exp(z)
    if b is not None:
        e = e * b
    s = e.sum(dim=dims, keepdim=True)
    empty = s == 0
    sign = torch.sign(s)
    if return_sign:
        s = s.abs()
    # log(1) = 0 where the row is empty, then -inf by masked_fill: value -inf, gradient 0.
    out = torch.log(s.masked_fill(empty, 1.0)).add(m).masked_fill(empty, -math.inf)

    inf_rows = m == math.inf
    if x.device.type != "meta" and bool(inf_rows.any()):  # a meta x has no values to look at
        # z is nan at +inf entries (inf - inf); the limit is decided by their weights alone.
        w_inf = (x == math.inf).to(x.dtype)
        if b is not None:
            w_inf = w_inf * b
        c = w_inf.sum(dim=dims, keepdim=True)
        sign = torch.where(inf_rows, torch.sign(c), sign)
        inf_value = torch.where(c > 0, math.inf, math.nan).to(out.dtype)
        if return_sign:
            inf_value = torch.where(c != 0, math.inf, math.nan).to(out.dtype)
        out = torch.where(inf_rows, inf_value, out)

    if not keepdim:
        out, sign = out.squeeze(dims), sign.squeeze(dims)
    if return_sign:
        return out, sign
    return out
