"""Gradient reversals a ``backward()`` passes through: a custom ``autograd.Function`` that is
the identity going forward and hands back its incoming gradient times a negative constant (the
gradient reversal layer of DANN, Ganin and Lempitsky 2015, §3.3; MME's ``grad_reverse``,
Saito et al. 2019). What lies below one is trained by the loss *against* it, on purpose: the
loss's gradient there is the adversarial half of a minimax, made for those tensors' own
optimizer (a feature extractor that minimises the entropy its classifier maximises).

Known by what the backward does, not by a name: each custom function's node in the graph gets a
hook for the one backward, and a node whose gradient out is a negative multiple of its gradient
in, element for element, is a reversal. Only custom functions are watched (torch's own
operations are never one), so a graph without them costs nothing."""

from __future__ import annotations

import torch

from toolkit.audit.record.backward import Graph, read_graph

__all__ = ["Reversals"]


class Reversals:
    """The custom functions of one backward's ``graph``, watched while it runs."""

    def __init__(self, graph: Graph) -> None:
        self.reversing: list[object] = []
        self._handles = []
        for node in graph.nodes.values():
            if getattr(node, "_forward_cls", None) is not None:
                hook = node.register_hook  # type: ignore[attr-defined]
                self._handles.append(hook(self._seen(node)))

    def _seen(self, node: object):
        def hook(grad_inputs, grad_outputs) -> None:
            if _reversed(grad_inputs, grad_outputs):
                self.reversing.append(node)
        return hook

    def below(self) -> set[int]:
        """Once the backward ran: ``id`` of the leaves that lie below a reversal (the tensors
        whose gradient came through it); empty where the graph has none. The hooks are
        removed."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if not self.reversing:
            return set()
        inputs = [n for node in self.reversing
                  for n, _ in node.next_functions]  # type: ignore[attr-defined]
        return set(read_graph(inputs).leaves)


def _reversed(grad_inputs: tuple, grad_outputs: tuple) -> bool:
    """Whether a node's gradient out (``grad_inputs``, one tensor for its one tensor input)
    is its gradient in times one negative constant: ``-c * g`` with ``c > 0``, to rounding."""
    ins = [g for g in grad_inputs if isinstance(g, torch.Tensor)]
    outs = [g for g in grad_outputs if isinstance(g, torch.Tensor)]
    if len(ins) != 1 or len(outs) != 1 or ins[0].shape != outs[0].shape or \
            not ins[0].is_floating_point():
        return False
    back, given = ins[0].detach().double(), outs[0].detach().double()
    norm = (given * given).sum()
    if norm == 0:
        return False
    c = -(back * given).sum() / norm
    return bool(c > 0) and torch.allclose(back, -c * given, rtol=1e-4, atol=0.0)
