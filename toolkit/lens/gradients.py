"""Gradient tools: compare gradients with and without blocks, and audit the autograd graph.

``compare_gradients`` answers "what does this block change in my gradient?"; the audit
functions answer "is there any path from this output back to that tensor?" by walking the
autograd graph without running backward.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from toolkit._utils.formatting import fmt
from toolkit._utils.param_validation import Callable_, Instance, check
from toolkit.core.stop_gradient import disable_blocks
from toolkit.lens.graph_walk import nodes, output_roots

__all__ = [
    "GradientComparison",
    "ParameterComparison",
    "assert_blocked",
    "compare_gradients",
    "count_graph_nodes",
    "has_gradient_path",
]

Params = torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor]


def _named_params(params: Params, *, where: str, arg: str = "params") -> dict[str, torch.Tensor]:
    if isinstance(params, torch.Tensor):
        named = {"param": params}
    elif isinstance(params, Mapping):
        named = {str(k): v for k, v in params.items()}
    elif isinstance(params, Sequence) and not isinstance(params, str):
        named = {str(i): p for i, p in enumerate(params)}
    else:
        raise TypeError(f"{where}: {arg} must be a tensor, a list of tensors or a dict of tensors, "
                        f"got {type(params).__name__}")
    if not named:
        raise ValueError(f"{where}: {arg} is empty; pass at least one tensor")
    for key, value in named.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{where}: {arg}[{key!r}] must be a tensor, got {type(value).__name__}")
    return named


def _gradients(loss_fn: Callable[[], torch.Tensor], named: dict[str, torch.Tensor]
               ) -> dict[str, torch.Tensor]:
    loss = loss_fn()
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(f"compare_gradients: loss_fn() must return a scalar tensor, got {shape}")
    tensors = list(named.values())
    if not loss.requires_grad:
        return {k: torch.zeros_like(v) for k, v in named.items()}
    grads = torch.autograd.grad(loss, tensors, allow_unused=True)
    return {k: (torch.zeros_like(v) if g is None else g.detach())
            for (k, v), g in zip(named.items(), grads)}


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ParameterComparison:
    """Blocked vs unblocked gradient of one parameter (or of all of them, flattened)."""

    name: str
    norm_blocked: float
    norm_unblocked: float
    cosine: float
    rel_diff: float
    max_abs_diff: float
    ref_rel_err_blocked: float | None = None
    ref_rel_err_unblocked: float | None = None

    @classmethod
    def from_tensors(cls, name: str, g_b: torch.Tensor, g_u: torch.Tensor,
                     ref: torch.Tensor | None = None) -> ParameterComparison:
        b = g_b.reshape(-1).to(torch.float64)
        u = g_u.reshape(-1).to(torch.float64)
        nb, nu = float(b.norm()), float(u.norm())
        diff = float((b - u).norm())
        if nb == 0.0 and nu == 0.0:
            cosine = 1.0
        elif nb == 0.0 or nu == 0.0:
            cosine = 0.0
        else:
            cosine = float(torch.dot(b, u) / (nb * nu))
        rel = 0.0 if diff == 0.0 else (diff / nb if nb > 0 else math.inf)
        max_abs = float((b - u).abs().max()) if b.numel() else 0.0
        ref_b = ref_u = None
        if ref is not None:
            r = ref.reshape(-1).to(torch.float64)
            nr = float(r.norm())
            ref_b = _relative_error(b, r, nr)
            ref_u = _relative_error(u, r, nr)
        return cls(name, nb, nu, cosine, rel, max_abs, ref_b, ref_u)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; non-finite numbers become ``None``."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = _finite_or_none(value) if isinstance(value, float) else value
        return out


def _relative_error(g: torch.Tensor, ref: torch.Tensor, ref_norm: float) -> float:
    err = float((g - ref).norm())
    if err == 0.0:
        return 0.0
    return err / ref_norm if ref_norm > 0 else math.inf


@dataclass(frozen=True)
class GradientComparison:
    """Result of :func:`compare_gradients`: per-parameter and overall metrics plus the gradients."""

    parameters: dict[str, ParameterComparison]
    overall: ParameterComparison
    blocked: dict[str, torch.Tensor] = field(repr=False)
    unblocked: dict[str, torch.Tensor] = field(repr=False)
    disable: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> ParameterComparison:
        return self.parameters[name]

    def to_dict(self) -> dict[str, Any]:
        """Metrics only (no tensors), ready for ``json.dumps``."""
        return {
            "disable": list(self.disable),
            "overall": self.overall.to_dict(),
            "parameters": {k: v.to_dict() for k, v in self.parameters.items()},
        }

    def __str__(self) -> str:
        has_ref = self.overall.ref_rel_err_blocked is not None
        cols = ["parameter", "|g_b|", "|g_u|", "cosine", "rel diff", "max |diff|"]
        if has_ref:
            cols += ["ref err b", "ref err u"]
        rows = [*self.parameters.values(), self.overall]
        table = [cols]
        for row in rows:
            cells = [row.name, row.norm_blocked, row.norm_unblocked, row.cosine, row.rel_diff,
                     row.max_abs_diff]
            if has_ref:
                cells += [row.ref_rel_err_blocked, row.ref_rel_err_unblocked]
            table.append([c if isinstance(c, str) else fmt(c, digits=4) for c in cells])
        widths = [max(len(r[i]) for r in table) for i in range(len(cols))]
        lines = ["  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in
                           enumerate(zip(r, widths))) for r in table]
        lines.insert(1, "-" * len(lines[0]))
        lines.insert(len(lines) - 1, "-" * len(lines[0]))
        patterns = ", ".join(repr(p) for p in self.disable)
        title = f"gradients blocked (b) vs inside disable_blocks({patterns}) (u)"
        return "\n".join([title, *lines])


def compare_gradients(
    loss_fn: Callable[[], torch.Tensor],
    params: Params,
    *,
    disable: Sequence[str] = ("*",),
    reference: Params | None = None,
) -> GradientComparison:
    """Gradient of ``loss_fn()`` with the blocks active and with them disabled.

    ``loss_fn`` is called twice: once normally (``g_b``, blocked) and once inside
    ``disable_blocks(*disable)`` (``g_u``, unblocked). For each parameter and for all of them
    flattened together it reports ``‖g_b‖``, ``‖g_u‖``, the cosine similarity, the relative
    difference ``‖g_b − g_u‖ / ‖g_b‖``, the max absolute difference and, with ``reference``
    (same structure as ``params``), ``‖g − g_ref‖ / ‖g_ref‖`` for each of ``g_b`` and ``g_u``.

    Conventions: cosine is 1 when both gradients are zero and 0 when only one is; a relative
    quantity with a zero denominator and a non-zero numerator is ``inf`` (``None`` in
    ``to_dict()``). Parameters that the loss does not reach get a zero gradient.

    Args:
        loss_fn: builds the scalar loss from scratch (it must recompute the blocked parts).
        params: a tensor, a list of tensors or a dict name → tensor, all ``requires_grad``.
        disable: fnmatch patterns for ``disable_blocks``; ``()`` disables every block,
            unnamed ones too. The default ``("*",)`` disables every *named* block.
        reference: the true gradient, if known, to score both against.

    >>> import torch
    >>> from toolkit import compare_gradients, stop_gradient
    >>> w = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> cmp = compare_gradients(lambda: (w * stop_gradient(w, name="demo.w")).sum(), w)
    >>> cmp.blocked["param"], cmp.unblocked["param"]
    (tensor([1., 2.]), tensor([2., 4.]))
    """
    check("compare_gradients", "loss_fn", loss_fn, [Callable_])
    named = _named_params(params, where="compare_gradients")
    for key, value in named.items():
        if not value.requires_grad:
            raise ValueError(f"compare_gradients: params[{key!r}] does not require grad; call "
                             f".requires_grad_() on it first")
    if isinstance(disable, str):
        raise TypeError(f"compare_gradients: disable must be a sequence of patterns such as "
                        f"('em.*',), got the string {disable!r}")
    disable = tuple(disable)
    refs: dict[str, torch.Tensor] | None = None
    if reference is not None:
        refs = _named_params(reference, where="compare_gradients", arg="reference")
        if refs.keys() != named.keys():
            raise ValueError(f"compare_gradients: reference must have the same keys as params "
                             f"{sorted(named)}, got {sorted(refs)}")
        for key in named:
            if refs[key].shape != named[key].shape:
                raise ValueError(f"compare_gradients: reference[{key!r}] must have shape "
                                 f"{tuple(named[key].shape)}, got {tuple(refs[key].shape)}")

    blocked = _gradients(loss_fn, named)
    with disable_blocks(*disable):
        unblocked = _gradients(loss_fn, named)

    per = {k: ParameterComparison.from_tensors(k, blocked[k], unblocked[k],
                                               None if refs is None else refs[k].detach())
           for k in named}

    def flat(d: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([d[k].reshape(-1).to(torch.float64) for k in named])

    overall = ParameterComparison.from_tensors(
        "(all)", flat(blocked), flat(unblocked), None if refs is None else flat(refs).detach())
    return GradientComparison(per, overall, blocked, unblocked, disable)


def has_gradient_path(output: Any, tensor: torch.Tensor) -> bool:
    """Whether a gradient can flow from ``output`` back to ``tensor``, without running backward.

    Walks ``output.grad_fn`` through ``next_functions`` (:func:`~toolkit.lens.graph_walk.walk`)
    and stops at the first hit; a leaf ``tensor`` is reached when its ``AccumulateGrad`` node
    is, a non-leaf one when its own ``grad_fn`` is. ``output`` may be a tensor or a
    list/tuple/dict of tensors.

    >>> import torch
    >>> from toolkit import has_gradient_path, stop_gradient
    >>> x = torch.ones(2, requires_grad=True)
    >>> has_gradient_path((2 * x).sum(), x), has_gradient_path(stop_gradient(x).sum(), x)
    (True, False)
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"has_gradient_path: tensor must be a torch.Tensor, "
                        f"got {type(tensor).__name__}")
    outputs = output_roots(output, "has_gradient_path", "output")
    if not tensor.requires_grad:
        return False
    if any(o is tensor for o in outputs):
        return True
    target = tensor.grad_fn  # None for a leaf: then its AccumulateGrad holds it
    return any(node is target or (target is None and getattr(node, "variable", None) is tensor)
               for node in nodes(outputs))


def count_graph_nodes(output: Any) -> int:
    """Number of distinct autograd nodes reachable from ``output`` (``AccumulateGrad`` included).

    A size measure of the backward graph: a ``stop_gradient`` boundary removes everything that
    was only reachable through it.

    >>> import torch
    >>> from toolkit.lens.gradients import count_graph_nodes
    >>> x = torch.ones(2, requires_grad=True)
    >>> count_graph_nodes((x.exp() * 2).sum())  # Sum, Mul, Exp, AccumulateGrad
    4
    """
    return sum(1 for _ in nodes(output_roots(output, "count_graph_nodes", "output")))


def assert_blocked(output: Any, tensor: torch.Tensor, name: str | None = None) -> None:
    """Raise ``AssertionError`` naming ``tensor`` if a gradient path leads from ``output`` to it."""
    check("assert_blocked", "name", name, [None, Instance(str, name="a str")])
    if has_gradient_path(output, tensor):
        label = name or f"tensor of shape {tuple(tensor.shape)} and dtype {tensor.dtype}"
        raise AssertionError(f"gradient path found from the output to {label!r}: it is not "
                             f"blocked (wrap it in stop_gradient before it is used)")
