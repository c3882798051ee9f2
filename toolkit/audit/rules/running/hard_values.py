"""A hard value without its straight-through term: a tensor with a graph (a network's output)
turned into a value without one by an operation with no derivative (a comparison, ``argmax``,
``topk``'s indices, ``multinomial``, a cast to an integer type), the result (or what is
computed from it without a graph: its one-hot, ``.float()``, a view) read by another network
whose output a loss reads. That loss term passes no gradient to the network that made the soft
value: the straight-through estimator (Bengio et al. 2013, arXiv:1308.3432; Jang et al. 2016,
arXiv:1611.01144 section 2.2), ``hard = (hard - soft).detach() + soft``, is missing.

The watch finds it in two passes, as it finds exact zeros (:mod:`.zeroed`).
In an audited iteration a network with tensors, called with gradients on after another call
made an output with a graph, that reads a floating tensor without a graph is a suspect (its
call's line and argument; a data batch is one too, and is judged once). Only then does the
watch follow values for one iteration under :class:`Hard`, a
:class:`~torch.overrides.TorchFunctionMode` that marks each value an operation with no
derivative made from a tensor with a graph, and every value computed from it without a graph,
with its :class:`Origin`: the soft tensor, the user's line that cut it, and the line where the
hard value first takes the soft value's shape (where the edit goes).

Not findings: a hard value no network reads (a metric), or one read under ``no_grad``; one
read by the network whose graph made it (a greedy token fed back, as scheduled sampling does on
purpose); a sample the script also scores against the graph that made it (a policy's action
read by ``log_prob`` or ``gather``: the score function trains that network, REINFORCE needs no
straight-through); values a hard mask picks from other tensors (``x[route == k]``), none of
which has the soft value's shape, so no hard value stands in for it; a value cut by
``.detach()`` or made by a factory (``zeros_like``), which holds no value of the soft tensor."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from toolkit.audit.edit import Edit
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import read_graph
from toolkit.audit.record.frames import Site, site_of, user_frame
from toolkit.audit.record.modes import insert_mode, remove_mode
from toolkit.audit.record.tensors import storage_of, tensors_in
from toolkit.audit.rules.running.fix_writer import FixWriter

__all__ = ["Hard", "Origin", "straight_through_after"]

#: operations whose output holds no value of the tensor they read (its shape, its device):
#: they make no hard value
_NO_VALUES = frozenset({"detach", "detach_", "__get__", "size", "dim", "numel", "isnan",
                        "isinf", "isfinite", "isneginf", "isposinf"})


@dataclass(eq=False)
class Origin:
    """Where a hard value came from: the tensor with a graph an operation with no derivative
    read (``soft``), the user's line of that operation (``made``), the name ``soft`` has in
    the frame there, and the first line where a value made from it without a graph has the
    soft value's shape and a floating type (``shaped``, where the edit goes), with the name it
    is assigned to."""

    soft: torch.Tensor
    made: Site | None
    what: str
    code: CodeType | None
    soft_name: str | None
    shaped: Site | None = None
    hard_name: str | None = None
    # whether a value made from it has the soft value's shape and a floating type: the hard
    # value stands in for the soft one (not a selection of other values by a hard mask)
    stands_in: bool = False
    # the nodes of graphs it met in an operation that made a graph (a log_prob, a gather)
    met: list[Any] = field(default_factory=list)

    def producers(self) -> dict[int, torch.Tensor]:
        """The leaf tensors the soft value's graph reaches, by ``id``."""
        if self.soft.grad_fn is None:
            return {id(self.soft): self.soft}
        return read_graph([self.soft.grad_fn]).leaves

    def scored(self, producers: dict[int, torch.Tensor]) -> bool:
        """Whether the hard value met a graph that reaches ``producers`` (a sample's
        log-probability under the policy that drew it)."""
        if not self.met:
            return False
        roots = [n for n in self.met if not isinstance(n, torch.Tensor)]
        leaves = {id(t) for t in self.met if isinstance(t, torch.Tensor)}
        leaves |= set(read_graph(roots).leaves)
        return bool(leaves & set(producers))


def _name_of(frame: Any, value: torch.Tensor, span: tuple[int, int, int, int] | None,
             path: str) -> str | None:
    """The local name ``value`` is bound to in ``frame``, one the expression at ``span`` reads
    when several are."""
    names = [n for n, v in frame.f_locals.items() if v is value and n.isidentifier()]
    if len(names) > 1 and span is not None:
        parsed = S.syntax_tree(path)
        if parsed is not None:
            for node in ast.walk(parsed[0]):
                if isinstance(node, ast.expr) and (node.lineno, node.end_lineno, node.col_offset,
                                                   node.end_col_offset) == span:
                    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                    names = [n for n in names if n in read] or names
                    break
    return names[0] if names else None


def _assigns_whole(site: Site) -> str | None:
    """The one plain name the statement at ``site`` assigns the expression at ``site.span``
    to (``b`` of ``b = (p > 0.5).float()``), or ``None``."""
    found = S.statement_at(site.path, site.line)
    if found is None or site.span is None:
        return None
    stmt, _ = found
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Name):
        value, name = stmt.value, stmt.targets[0].id
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
        value, name = stmt.value, stmt.target.id
    else:
        return None
    if (value.lineno, value.end_lineno, value.col_offset, value.end_col_offset) != site.span:
        return None
    return name


class Hard(TorchFunctionMode):
    """While on the mode stack: the hard values made since (see the module's docstring), by
    where their values live, each with its :class:`Origin`."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[int, Origin] = {}
        # the tensors marked, held until the watch leaves: a storage freed meanwhile could be
        # handed to an unrelated tensor at the same address
        self.kept: list[torch.Tensor] = []
        self.on = False

    def enter(self) -> None:
        """On the top of the mode stack (the modes the script enters later nest inside it)."""
        insert_mode(self, torch._C._len_torch_function_stack())
        self.on = True

    def leave(self) -> bool:
        """Off the mode stack; ``False`` while it dispatches a call (try again later)."""
        if self.on and remove_mode(self):
            self.on = False
            self.marks, self.kept = {}, []
        return not self.on

    def origin(self, t: torch.Tensor) -> Origin | None:
        """The :class:`Origin` of a hard value, or ``None`` for any other tensor."""
        return self.marks.get(storage_of(t)) if self.marks else None

    def _mark(self, t: torch.Tensor, origin: Origin) -> None:
        self.marks.setdefault(storage_of(t), origin)
        self.kept.append(t)
        if origin.shaped is None and t.is_floating_point() and t.shape == origin.soft.shape:
            origin.stands_in = True
            frame = user_frame(1)
            if frame is None or frame.f_code is not origin.code or origin.soft_name is None \
                    or frame.f_locals.get(origin.soft_name) is not origin.soft:
                return
            site = site_of(frame)
            name = _assigns_whole(site)
            if name is not None:
                origin.shaped, origin.hard_name = site, name

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in _NO_VALUES or name.endswith("_like") or name.startswith("new_"):
            return out
        ins = tensors_in(args) + (tensors_in(kwargs) if kwargs else [])
        if not ins:
            return out
        outs = tensors_in(out)
        origins = [o for t in ins if (o := self.marks.get(storage_of(t))) is not None] \
            if self.marks else []
        if origins:
            graphed = [t for t in ins if t.requires_grad]
            for t in outs:
                if not t.requires_grad:
                    self._mark(t, origins[0])
                elif graphed:
                    origins[0].met.extend(g.grad_fn if g.grad_fn is not None else g
                                          for g in graphed)
            return out
        if not torch.is_grad_enabled():
            return out
        soft = next((t for t in ins if t.requires_grad), None)
        if soft is None:
            return out
        cut = [t for t in outs if not t.requires_grad and not t.is_floating_point()
               and not t.is_complex()]
        if not cut:
            return out
        frame = user_frame(0)
        site = site_of(frame) if frame is not None else None
        origin = Origin(soft, site, name, frame.f_code if frame is not None else None,
                        _name_of(frame, soft, site.span, site.path)
                        if frame is not None and site is not None else None)
        for t in cut:
            self._mark(t, origin)
        return out


def straight_through_after(fixes: FixWriter, origin: Origin) -> Edit | None:
    """``hard = (hard - soft).detach() + soft`` on its own line after the line where the hard
    value takes the soft value's shape: the same values forward, the soft value's gradient
    back."""
    if origin.shaped is None or origin.hard_name is None or origin.soft_name is None:
        return None
    hard, soft = origin.hard_name, origin.soft_name
    return fixes.insert_after(origin.shaped.path, origin.shaped.line,
                          f"{hard} = ({hard} - {soft}).detach() + {soft}")
