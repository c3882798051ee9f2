"""The gradient-flow lens: can a gradient reach this parameter, along which path, and what does
each named block change?

- :func:`gradient_path` — the shortest chain of autograd nodes from a loss to a tensor;
- :func:`assert_no_gradient` — the test helper "these parameters must receive no gradient",
  whose message names every leaking parameter and its path;
- :func:`gradient_flow` — runs a loss with every named block, then with each block disabled in
  turn, and tabulates the gradient each parameter group receives.

All three walk the graph or call ``torch.autograd.grad``; none runs ``backward()`` or touches a
parameter's ``.grad``. They stop at the cuts that :func:`~toolkit.lens.trace_cuts` makes
visible, as autograd does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from toolkit._utils.formatting import fmt
from toolkit._utils.rng import get_rng_state, set_rng_state
from toolkit.core.stop_gradient import disable_blocks, record_blocks
from toolkit.lens.backward_graph import ShortestPaths, named_tensors, node_label
from toolkit.lens.gradients import ParameterComparison
from toolkit.lens.graph_walk import output_roots

__all__ = ["GradientFlow", "GradientLeakError", "assert_no_gradient", "gradient_flow",
           "gradient_path"]


def gradient_path(loss: torch.Tensor, tensor: torch.Tensor, *, name: str | None = None
                  ) -> list[str] | None:
    """The shortest chain of autograd nodes from ``loss`` to ``tensor``, or ``None``.

    A breadth-first search from ``loss.grad_fn`` through ``next_functions`` (no backward is
    run). The chain ends at the node where ``tensor`` receives its gradient: the
    ``AccumulateGrad`` of a leaf (a parameter), or the ``grad_fn`` of a non-leaf tensor (through
    the output that is ``tensor``). Among several chains the one with fewest nodes is returned.
    ``None`` means no gradient can reach ``tensor``: it does not require grad, it is not used
    by ``loss``, or only through cuts (``stop_gradient``, ``as_constant``, ``detach``), or
    ``loss`` has no ``grad_fn``. If ``loss`` is ``tensor`` itself the chain is its own
    ``grad_fn`` (``[]`` for a leaf).

    Args:
        loss: the output (a tensor, or a list/tuple/dict of tensors).
        tensor: the tensor that should or should not receive gradient.
        name: what to call ``tensor`` in the last element (default: ``"AccumulateGrad"`` for a
            leaf, its ``grad_fn``'s name otherwise).

    Returns:
        Node names such as ``["MseLoss", "Sub", "Addmm", "AccumulateGrad"]``, or ``None``.

    >>> import torch
    >>> from toolkit import stop_gradient
    >>> from toolkit.lens import gradient_path
    >>> w = torch.ones(2, requires_grad=True)
    >>> gradient_path((w.exp() * 2).sum(), w, name="w")
    ['Sum', 'Mul', 'Exp', 'w']
    >>> gradient_path(stop_gradient(w).sum(), w) is None
    True
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"gradient_path: tensor must be a torch.Tensor, got "
                        f"{type(tensor).__name__}")
    nodes = ShortestPaths(output_roots(loss, "gradient_path")).path_to(tensor)
    return None if nodes is None else _names(nodes, tensor, name)


def _names(nodes: list[Any], tensor: torch.Tensor, name: str | None) -> list[str]:
    names = [node_label(n) for n in nodes]
    if name is not None:
        if names:
            names[-1] = name if tensor.grad_fn is None else f"{names[-1]} ({name})"
        else:
            names = [name]
    return names


class GradientLeakError(AssertionError):
    """Gradient reaches parameters that must receive none (see :func:`assert_no_gradient`).

    ``paths`` maps each leaking parameter's name to its shortest path (node names).
    """

    def __init__(self, message: str, paths: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.paths = paths


def assert_no_gradient(loss: torch.Tensor, params: Any, why: str = "") -> None:
    """Raise :class:`GradientLeakError` (an ``AssertionError``) if gradient can reach ``params``.

    The test helper for "the target network must receive no gradient": one breadth-first search
    of ``loss``'s backward graph (no backward pass), then a lookup per parameter. The message
    names every leaking parameter (by module path for a module, by key for a dict or
    ``named_parameters()``, by index for a list) with its shortest path ``A -> B -> …`` and
    ends with ``why``. Parameters that do not require grad cannot leak.

    Args:
        loss: the output whose backward must not reach ``params``.
        params: a tensor, a list or dict of tensors, an ``nn.Module`` (every parameter) or
            ``model.named_parameters()``.
        why: a sentence that says why, printed with the failure.

    >>> import torch
    >>> from toolkit import stop_gradient
    >>> from toolkit.lens import assert_no_gradient
    >>> target = torch.nn.Linear(2, 1)
    >>> x = torch.ones(1, 2)
    >>> assert_no_gradient(stop_gradient(target(x)).sum(), target)   # passes
    >>> assert_no_gradient(target(x).sum(), {"target.bias": target.bias}, why="it is frozen")
    Traceback (most recent call last):
    ...
    toolkit.lens.flow.GradientLeakError: gradient reaches 1 of 1 parameter that must receive none (it is frozen):
      target.bias: Sum -> Addmm -> target.bias
    Cut the path with stop_gradient(x, name=...) or as_constant(fn, ..., name=...) where the value must be a constant.
    """
    if not isinstance(why, str):
        raise TypeError(f"assert_no_gradient: why must be a str, got {type(why).__name__}")
    named = named_tensors(params, where="assert_no_gradient")
    search = ShortestPaths(output_roots(loss, "assert_no_gradient"))
    paths: dict[str, list[str]] = {}
    for name, tensor in named.items():
        nodes = search.path_to(tensor)
        if nodes is not None:
            paths[name] = _names(nodes, tensor, name)
    if paths:
        noun = "parameter" if len(named) == 1 else "parameters"
        lines = [f"gradient reaches {len(paths)} of {len(named)} {noun} that must receive none"
                 + (f" ({why})" if why else "") + ":"]
        lines += [f"  {name}: {' -> '.join(path)}" for name, path in paths.items()]
        lines.append("Cut the path with stop_gradient(x, name=...) or as_constant(fn, ..., "
                     "name=...) where the value must be a constant.")
        raise GradientLeakError("\n".join(lines), paths)


# --- gradient_flow ---------------------------------------------------------------------------------

_COLUMNS = [("block", "block"), ("group", "group"), ("norm_blocked", "‖g‖ blocked"),
            ("norm_unblocked", "‖g‖ unblocked"), ("cosine", "cosine"), ("rel_diff", "rel diff"),
            ("reached", "reached (b/u)")]


def _cell(row: dict[str, Any], key: str) -> str:
    if key == "reached":
        return "/".join("yes" if row[k] else "no" for k in ("reached_blocked",
                                                            "reached_unblocked"))
    value = row[key]
    return value if isinstance(value, str) else fmt(value, digits=4)


@dataclass(frozen=True)
class GradientFlow:
    """The table of :func:`gradient_flow`: one row per (block, group).

    Each row has ``block``, ``group``, ``norm_blocked`` and ``norm_unblocked`` (the group's
    gradient, all its tensors flattened, with every block active and with ``block`` disabled),
    ``cosine``, ``rel_diff`` (``‖g_b − g_u‖ / ‖g_b‖``, ``inf`` when only ``g_u`` is non-zero),
    ``max_abs_diff``, and ``reached_blocked`` / ``reached_unblocked`` (whether any gradient path
    reached the group at all). ``loss`` is the loss with every block active and
    ``gradients[group]`` that group's flattened gradient (float64).
    """

    rows: list[dict[str, Any]]
    blocks: tuple[str, ...]
    groups: tuple[str, ...]
    loss: float = math.nan
    gradients: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)

    def row(self, block: str, group: str) -> dict[str, Any]:
        """The row of ``block`` and ``group``."""
        for row in self.rows:
            if row["block"] == block and row["group"] == group:
                return row
        raise KeyError(f"GradientFlow.row: no row for block {block!r} and group {group!r}; "
                       f"blocks {list(self.blocks)}, groups {list(self.groups)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the rows with non-finite numbers as ``None``, blocks, groups, loss."""
        rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in row.items()} for row in self.rows]
        return {"rows": rows, "blocks": list(self.blocks), "groups": list(self.groups),
                "loss": self.loss if math.isfinite(self.loss) else None}

    def _table(self) -> list[list[str]]:
        return [[title for _, title in _COLUMNS],
                *[[_cell(row, key) for key, _ in _COLUMNS] for row in self.rows]]

    def __str__(self) -> str:
        title = (f"gradient flow: every named block active (b), then each disabled in turn (u); "
                 f"{1 + len(self.blocks)} forward+backward passes")
        if not self.rows:
            return f"{title}\n(no named block ran in loss_fn: nothing to disable)"
        table = self._table()
        widths = [max(len(r[i]) for r in table) for i in range(len(_COLUMNS))]
        lines = ["  ".join(c.ljust(w) if j < 2 else c.rjust(w)
                           for j, (c, w) in enumerate(zip(r, widths))).rstrip() for r in table]
        lines.insert(1, "-" * max(len(line) for line in lines))
        return "\n".join([title, *lines])

    def to_markdown(self) -> str:
        """A Markdown table (GitHub style) of the rows."""
        if not self.rows:
            return "_no named block ran in loss_fn: nothing to disable_"
        table = self._table()
        align = ["---", "---", *["---:"] * (len(_COLUMNS) - 2)]
        body = [[f"`{r[0]}`", *r[1:]] for r in table[1:]]
        return "\n".join("| " + " | ".join(r) + " |" for r in [table[0], align, *body])


def _gradients(loss_fn: Callable[[], torch.Tensor], tensors: list[torch.Tensor]
               ) -> tuple[float, list[torch.Tensor | None]]:
    loss = loss_fn()
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        got = f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else (
            type(loss).__name__)
        raise ValueError(f"gradient_flow: loss_fn() must return a scalar tensor, got {got}")
    wanted = [i for i, t in enumerate(tensors) if t.requires_grad]
    grads: list[torch.Tensor | None] = [None] * len(tensors)
    if loss.requires_grad and wanted:
        found = torch.autograd.grad(loss, [tensors[i] for i in wanted], allow_unused=True)
        for i, g in zip(wanted, found):
            grads[i] = g
    return float(loss.detach()), grads


def gradient_flow(loss_fn: Callable[[], torch.Tensor], groups: Mapping[str, Any]
                  ) -> GradientFlow:
    """What each named block changes in the gradient of each parameter group.

    ``loss_fn()`` is run once with every block active (recording, with
    :func:`~toolkit.record_blocks`, which named blocks ran), then once per named block that
    ran, inside ``disable_blocks(block)``: ``1 + n_blocks`` forward+backward passes, each one
    ``torch.autograd.grad(..., allow_unused=True)`` (``.grad`` is never touched). The global random
    generators (``random``, numpy, torch's CPU and CUDA) are put back in the same state before
    every call, so dropout or sampling inside ``loss_fn`` draws the same numbers each time.

    For group ``G`` with tensors ``θ_G`` (flattened and concatenated), ``g_b = ∂L/∂θ_G`` with
    the blocks active and ``g_u`` the same with ``block`` disabled; each row reports ``‖g_b‖``,
    ``‖g_u‖``, their cosine (1 when both are zero, 0 when one is), ``‖g_b − g_u‖ / ‖g_b‖`` and
    whether any gradient path reached the group (a tensor that does not require grad, or is not
    reached, counts as a zero gradient).

    Args:
        loss_fn: builds a scalar loss from scratch (no optimizer step, no side effects).
        groups: name -> parameters (an ``nn.Module``, a tensor, a list or dict of tensors).

    Returns:
        :class:`GradientFlow`; ``str()`` prints the table, ``to_markdown()`` formats it.

    >>> import torch
    >>> from toolkit import stop_gradient
    >>> from toolkit.lens import gradient_flow
    >>> w = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> flow = gradient_flow(lambda: (w * stop_gradient(w, name="demo.w")).sum(), {"w": w})
    >>> row = flow.row("demo.w", "w")
    >>> round(row["norm_blocked"], 3), round(row["norm_unblocked"], 3)   # |w| and |2w|
    (2.236, 4.472)
    """
    if not callable(loss_fn):
        raise TypeError(f"gradient_flow: loss_fn must be callable, got {type(loss_fn).__name__}")
    if not isinstance(groups, Mapping):
        raise TypeError(f"gradient_flow: groups must be a dict name -> parameters, got "
                        f"{type(groups).__name__}")
    if not groups:
        raise ValueError("gradient_flow: groups is empty; pass a dict such as "
                         "{'online': q_net, 'target': target_net}")
    members: dict[str, list[int]] = {}
    tensors: list[torch.Tensor] = []
    position: dict[int, int] = {}
    for group, params in groups.items():
        named = named_tensors(params, where="gradient_flow", arg="groups", prefix=str(group))
        members[str(group)] = []
        for tensor in named.values():
            if id(tensor) not in position:
                position[id(tensor)] = len(tensors)
                tensors.append(tensor)
            members[str(group)].append(position[id(tensor)])

    state = get_rng_state()
    with record_blocks() as blocks:
        loss, blocked = _gradients(loss_fn, tensors)
    after = get_rng_state()
    flat_blocked = {group: _flat([blocked[i] for i in idx], [tensors[i] for i in idx])
                    for group, idx in members.items()}
    rows: list[dict[str, Any]] = []
    for block in blocks:
        set_rng_state(state)
        with disable_blocks(block):
            _, unblocked = _gradients(loss_fn, tensors)
        for group, idx in members.items():
            g_u = _flat([unblocked[i] for i in idx], [tensors[i] for i in idx])
            cmp = ParameterComparison.from_tensors(group, flat_blocked[group], g_u)
            rows.append({"block": block, "group": group, "norm_blocked": cmp.norm_blocked,
                         "norm_unblocked": cmp.norm_unblocked, "cosine": cmp.cosine,
                         "rel_diff": cmp.rel_diff, "max_abs_diff": cmp.max_abs_diff,
                         "reached_blocked": any(blocked[i] is not None for i in idx),
                         "reached_unblocked": any(unblocked[i] is not None for i in idx)})
    set_rng_state(after)  # as if loss_fn had run once
    return GradientFlow(rows, tuple(blocks), tuple(members), loss, flat_blocked)


def _flat(grads: list[torch.Tensor | None], tensors: list[torch.Tensor]) -> torch.Tensor:
    """The gradients of one group as one float64 vector (zeros where none arrived), written in
    one pass into a preallocated vector on the first tensor's device."""
    out = torch.empty(sum(t.numel() for t in tensors), dtype=torch.float64,
                      device=tensors[0].device)
    offset = 0
    for g, t in zip(grads, tensors):
        part = out[offset:offset + t.numel()]
        if g is None:
            part.zero_()
        else:
            part.copy_(g.reshape(-1))
        offset += t.numel()
    return out
