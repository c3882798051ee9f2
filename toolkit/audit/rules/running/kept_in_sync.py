"""A copy kept in sync and never read: a network the script holds, never calls, and moves
itself toward a network an optimizer steps (``k <- tau q + (1 - tau) k``, a Polyak or EMA
copy, or a copy outright), while the stepped network itself is called under ``no_grad`` where
its output becomes a constant the loss compares with. The copy was made to be that constant
(a target network, a mean teacher): the target is read from the network being trained.

Three pieces, each kept apart from the rest of the watch:

- :class:`Constants`, a :class:`~torch.overrides.TorchFunctionMode` that follows the values a
  network's ``no_grad`` call made through the operations that read them, and keeps the graph
  node where such a constant first meets a tensor with a graph (the comparison's constant
  side, a loss's weight). It is on the mode stack only while it holds constants: from the
  first one a call makes to the next step;
- :func:`toward`: whether a tensor moved along the line to another (what is left of the
  distance is the old one, shrunk, or nothing);
- :class:`KeptInSync`: the script's namespaces (the globals of its frames), the values of the
  networks they hold that no call reads, snapshotted at each step and at the end, and the
  copies it finds, each with the network it follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from toolkit.audit.edit import Edit
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site
from toolkit.audit.record.modes import insert_mode, remove_mode
from toolkit.audit.record.tensors import storage_of, tensors_in
from toolkit.audit.rules.running.fix_writer import FixWriter

__all__ = ["Constants", "Copy", "KeptInSync", "swap_call", "toward"]

#: the calls that add one value to another (a term to a loss)
_SUMS = frozenset({"add", "sub", "subtract", "__add__", "__radd__", "__sub__", "__rsub__",
                   "__iadd__", "__isub__", "add_", "sub_"})


class Constants(TorchFunctionMode):
    """While it holds constants: the storages of each ``no_grad`` call's outputs
    (:meth:`made`), those of every floating-point tensor computed from them without a graph,
    and, by node, where one of them that is no single number meets a tensor with a graph
    (``met``: node id -> (node, the calls' keys)).

    A mode costs a Python dispatch on every operation; one with no constants does nothing
    with it. So it goes on the mode stack (at ``depth``, the stack's depth when the watch
    began: below every mode the script entered since) with the first constant a call makes,
    and leaves it at :meth:`clear`: what it follows is the same as had it been there all
    along."""

    def __init__(self, depth: int = 0) -> None:
        super().__init__()
        self.depth = depth
        self.following = False      # on the mode stack
        self.sources: dict[int, set[tuple]] = {}
        # the tensors themselves, held until :meth:`clear`: a storage freed meanwhile could
        # be handed to an unrelated tensor at the same address
        self.kept: list[torch.Tensor] = []
        self.met: dict[int, tuple[Any, set[tuple]]] = {}
        # the keys whose values, summed into a loss as a single number, meet it too
        self.terms: set = set()

    def _mark(self, t: torch.Tensor, keys: set[tuple]) -> None:
        if not (t.is_floating_point() or t.is_complex()):
            return   # an index or a mask made from a constant (a greedy action) is a choice
        where = storage_of(t)
        if where:
            self.sources.setdefault(where, set()).update(keys)
            self.kept.append(t)

    def made(self, outputs: list[torch.Tensor], key: tuple, *, term: bool = False) -> None:
        """``outputs`` of a ``no_grad`` call (``key``) are constants: followed from now on.
        ``term``: a single number computed from them and added to a value with a graph meets
        it too (a sample a loss's term is computed from alone: VGAE's reconstruction through
        its inner-product decoder, which has no weights, reaches the loss as one number)."""
        for t in outputs:
            self._mark(t, {key})
        if term:
            self.terms.add(key)
        if self.sources and not self.following:
            insert_mode(self, min(self.depth, torch._C._len_torch_function_stack()))
            self.following = True

    def clear(self) -> None:
        """Forget the constants and where they met a graph (at each step: a loss reads its
        target before its step), and leave the mode stack (while it dispatches a call, it
        stays, doing nothing, until the next :meth:`clear`)."""
        if self.sources or self.kept or self.met or self.terms:
            self.sources, self.kept, self.met, self.terms = {}, [], {}, set()
        if self.following and remove_mode(self):
            self.following = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.sources:
            return out
        ins = tensors_in(args) + tensors_in(kwargs or {})
        keys: set[tuple] = set()
        for t in ins:
            keys |= self.sources.get(storage_of(t), set())
        if not keys:
            return out
        outs = tensors_in(out)
        if func is torch.Tensor.__setitem__ and isinstance(args[0], torch.Tensor) and \
                args[0].grad_fn is None and not args[0].requires_grad:
            # written in place, without a graph (``targets[:, :k] = q``): the tensor written
            # holds the constant as its own (the write returns nothing)
            outs = [args[0]]
        graphed = [t for t in ins if t.grad_fn is not None or t.requires_grad]
        node = next((t.grad_fn for t in outs if t.grad_fn is not None), None)
        if graphed and node is not None:
            # a number (a 0-dim loss or reward: the change of the student's loss that weighs
            # the teacher's in Meta Pseudo Labels) is no value the loss compares with
            compared = {k for t in ins if t.dim() for k in self.sources.get(storage_of(t), ())}
            if self.terms and getattr(func, "__name__", "") in _SUMS:
                compared |= {k for t in ins if not t.dim()
                             for k in self.sources.get(storage_of(t), ()) if k in self.terms}
            if compared:
                self.met.setdefault(id(node), (node, set()))[1].update(compared)
        else:
            for t in outs:
                if t.grad_fn is None:
                    self._mark(t, keys)
        return out

    def fed(self, nodes: dict[int, Any]) -> set[tuple]:
        """The keys of the calls whose constants meet a graph, given by its ``nodes`` (by
        ``id``: :attr:`~toolkit.audit.record.backward.Graph.nodes`, read once per backward)."""
        found: set[tuple] = set()
        for key, (node, keys) in self.met.items():
            if nodes.get(key) is node:
                found |= keys
        return found


def toward(before: torch.Tensor, now: torch.Tensor, other: torch.Tensor, *,
           eps: float = torch.finfo(torch.float32).eps) -> bool:
    """Whether ``now`` is ``before`` moved along the line to ``other`` (``k <- m k + (1 - m) q``,
    or a copy outright): the move is a positive multiple, at most 1, of ``other - before``, up
    to what rounding in a dtype of machine epsilon ``eps`` leaves beside the line. A small move
    is not along the line merely for being small beside the gap: a part across the line larger
    than rounding (Reptile's step back toward its snapshot) is another direction, and a move
    within rounding has none."""
    if torch.equal(now, before):
        return False
    move, line = now - before, other - before
    if not bool(line.any()):
        return False
    share = float(move @ line) / float(line @ line)
    across = float((move - share * line).norm())
    slack = 4 * eps * float(before.norm() + other.norm())
    # a move no larger than rounding says nothing of its direction (a projection onto a ball
    # that rescales one row by a hair)
    return 0 < share <= 1 + 1e-6 and across <= slack < float(move.norm())


def _shapes(module: nn.Module) -> tuple:
    return tuple(tuple(p.shape) for p in module.parameters())


def _values(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten().double() for p in module.parameters()])


@dataclass
class Copy:
    """``copy`` (called ``name`` in the script) moved toward ``online`` (a stepped network;
    the outermost of those it moved toward: ``critic``, not its ``critic.net`` of the same
    tensors)."""

    copy: nn.Module
    name: str
    online: nn.Module


class KeptInSync:
    """The networks the script's namespaces hold that no call reads, and the copies among
    them: each snapshot (:meth:`snapshot`) compares their values with the last one."""

    def __init__(self) -> None:
        # id -> (the prefix its names are read with, a module's globals or an object)
        self.namespaces: dict[int, tuple[str, Any]] = {}
        self.before: dict[int, torch.Tensor] = {}
        self.copies: dict[int, Copy] = {}

    def saw(self, frame: FrameType) -> None:
        """A frame of the script that called a network: its module's globals, and the
        attributes of the object its method runs on (``self``), hold the networks it names
        (``qf2_target``; ``self.critic_target`` of an agent)."""
        self.namespaces.setdefault(id(frame.f_globals), ("", frame.f_globals))
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self":
            owner = frame.f_locals.get("self")
            if owner is not None and hasattr(owner, "__dict__"):
                self.namespaces.setdefault(id(owner), ("self.", owner))

    def held(self) -> list[tuple[str, nn.Module]]:
        """Each network the namespaces seen hold, once, by the name the script reads it by
        (the first namespace that holds it: a module's globals before an object's)."""
        out, seen = [], set()
        for prefix, space in list(self.namespaces.values()):
            items = (space.items() if isinstance(space, dict) else
                     space._modules.items() if isinstance(space, nn.Module) else
                     vars(space).items())
            for name, value in list(items):
                if isinstance(value, nn.Module) and id(value) not in seen:
                    seen.add(id(value))
                    out.append((prefix + name, value))
        return out

    def snapshot(self, called: set[int], stepped: set[int], online: list[nn.Module]) -> None:
        """``called``: the modules a call read; ``stepped``: the tensors an optimizer holds;
        ``online``: the networks the script called. A held network with tensors, none of them
        stepped, no part of it called, is compared with its last values: moved toward a
        network whose tensors are all stepped, of the same shapes, it is that network's copy."""
        for name, module in self.held():
            params = list(module.parameters())
            if not params or any(id(p) in stepped for p in params) or any(
                    id(m) in called for m in module.modules()):
                continue
            now = _values(module)
            before = self.before.get(id(module))
            self.before[id(module)] = now
            if before is None or before.shape != now.shape or id(module) in self.copies:
                continue
            shapes = _shapes(module)
            found = []
            for other in online:
                ps = list(other.parameters())
                if other is module or not ps or not all(id(p) in stepped for p in ps) or \
                        _shapes(other) != shapes:
                    continue
                if toward(before, now, _values(other), eps=torch.finfo(params[0].dtype).eps):
                    found.append(other)
            outer = [m for m in found
                     if not any(o is not m and any(x is m for x in o.modules()) for o in found)]
            if outer:
                self.copies[id(module)] = Copy(module, name, outer[0])

    def name_in(self, module: nn.Module) -> str | None:
        return next((n for n, m in self.held() if m is module), None)


def swap_call(fixes: FixWriter, site: Site, online: str, copy: str) -> Edit | None:
    """The call at ``site`` made on ``copy`` where it is made on ``online`` (``qf(s)`` ->
    ``qf_target(s)``), or ``None`` when the call is not spelled ``online(...)``."""
    found = S.call_at(site.path, site.span)
    if found is None:
        return None
    call, text = found
    func = call.func
    if S.segment(text, func) != online:
        return None
    return fixes.edit_at(site.path, (func.lineno, func.col_offset),
                         (func.end_lineno or func.lineno, func.end_col_offset or 0), copy)
