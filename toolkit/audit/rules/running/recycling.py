"""An estimate fed back within one iteration: a network's own output, which no loss compares,
read (through any computation) by a later call of the same network on the same input, whose
output the loss compares. Self-conditioning (Chen, Zhang and Hinton, "Analog Bits",
arXiv:2208.04202: the first estimate of ``x_0`` is made under ``torch.no_grad()``) and
AlphaFold 2's recycling (Jumper et al., Nature 596, 2021, Supplementary 1.10: the recycled
outputs pass through ``stop_gradient``) feed the network its own estimate as a *condition*:
on other iterations that argument holds a constant (zeros, or nothing), so the network is
trained to predict without the estimate too, and the estimate is an input like the data. Kept
in the graph, the loss trains the network through every earlier pass as well.

A weight-tied unroll trained end to end (learned ISTA, an RNN cell stepped over a sequence)
looks alike within one iteration; it is told apart by what the published forms share: the
later call reads the very tensor the earlier one read (the same input again, not the next
observation), and the call the loss compares reads a constant in the estimate's argument on
some iteration (an unroll's last step always reads a computed state). An estimate the loss
compares too is a prediction fed back (:mod:`~toolkit.audit.rules.running.feedback`), not this.

:class:`Recycling` holds what the watch records: each trained call of the current iteration
(:meth:`Recycling.called`), and across iterations the arguments the compared calls read as
constants. The rule that reads it is :func:`toolkit.audit.rules.running.recycled.recycled`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import tensors_in

__all__ = ["Pass", "Recycling", "identity"]


@dataclass
class Pass:
    """One call of a network with weights, made with gradients, whose outputs have a graph:
    the module, its order in the iteration, its site, per positional argument either ``None``
    (a constant: ``None`` or tensors with no graph), the graph's nodes it holds, or ``()``
    (anything else), and the tensors it holds as :func:`identity` knows them; the constant
    tensors themselves (kept alive while the iteration runs, so that no later tensor takes
    their place in memory), its outputs' nodes, the event it ran at, and whether its weights
    train (``False``: frozen for this call, its outputs' graph that of what it read, a world
    model a policy is trained through)."""

    module: nn.Module
    order: int
    site: Site
    slots: list[tuple[Any, ...] | None]
    held: list[set[tuple]]
    kept: list[torch.Tensor]
    outs: list[Any]
    event: int
    trains: bool = True

    def same_input(self, other: Pass, skip: int) -> bool:
        """Whether some argument (other than the ``skip``-th) holds the very tensor the same
        argument of ``other`` held: the network applied again to the same input."""
        for i, (mine, theirs) in enumerate(zip(self.held, other.held)):
            if i != skip and mine & theirs:
                return True
        return False


def identity(t: torch.Tensor) -> tuple:
    """A tensor as the graph or the memory knows it: its node and output for one made with
    gradients, else where its values live and how they are laid out (a view of the next time
    step of a sequence is another place)."""
    if t.grad_fn is not None:
        return ("node", id(t.grad_fn), t.output_nr)
    try:
        where = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return ("id", id(t))
    return ("data", where, t.storage_offset(), tuple(t.shape), tuple(t.stride()))


@dataclass
class Recycling:
    """What the watch records for :func:`~toolkit.audit.rules.running.recycled.recycled`."""

    passes: list[Pass] = field(default_factory=list)
    order: int = 0
    # (module id, argument index) read as a constant by a call a loss compared
    constant: set[tuple[int, int]] = field(default_factory=set)
    # the failures waiting for that evidence, by the same key
    pending: dict[tuple[int, int], list[ScriptFinding]] = field(default_factory=dict)

    def called(self, module: nn.Module, args: tuple, outs: list[torch.Tensor], site: Site,
               event: int) -> None:
        """A call of ``module`` made with gradients by the user's code."""
        params = list(module.parameters())
        nodes = [t.grad_fn for t in outs if t.grad_fn is not None]
        if not params or not nodes:
            return
        trains = any(p.requires_grad for p in params)
        self.order += 1
        slots: list[tuple[Any, ...] | None] = []
        held: list[set[tuple]] = []
        kept: list[torch.Tensor] = []
        for arg in args:
            ts = tensors_in(arg)
            graph = tuple(t.grad_fn for t in ts if t.grad_fn is not None)
            if graph:
                slots.append(graph)
            elif arg is None or (ts and not any(t.requires_grad for t in ts)):
                slots.append(None)
            else:
                slots.append(())
            held.append({identity(t) for t in ts})
            kept += [t for t in ts if t.grad_fn is None]
        self.passes.append(Pass(module, self.order, site, slots, held, kept, nodes, event,
                                trains))

    def new_iteration(self, keep: int) -> None:
        """The calls made before event ``keep`` (the last step) are the last iteration's."""
        if self.passes:
            self.passes = [p for p in self.passes if p.event >= keep]
