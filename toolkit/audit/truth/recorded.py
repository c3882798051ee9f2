"""The recorded step: everything the audit's rules read, built once per audit.

:func:`~toolkit.audit.audit_step` runs the step twice inside a
:class:`~toolkit.audit.record.recording.Recording`, then builds one :class:`RecordedStep` from the
second call's losses: each loss's backward graph (searched once), which tensors each loss's
optimizer steps, the regions of computed weights, the tensors written in place from other
trained tensors. Each rule of :data:`~toolkit.audit.step.RULES` is a function of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from toolkit.audit.record.recording import Recording
from toolkit.audit.record.sites import Line
from toolkit.audit.truth.graph import Graph, parameter_regions
from toolkit.audit.truth.labels import Labeller
from toolkit.audit.truth.truth import Truth
from toolkit.lens.backward_graph import ShortestPaths
from toolkit.lens.graph_walk import output_roots

__all__ = ["Found", "RecordedStep", "record_step"]

#: what a rule returns: ``StepAudit`` field name -> findings of that kind
Found = dict[str, list[Any]]


@dataclass
class RecordedStep:
    """The second call of a step, read once for every rule.

    ``losses``: name -> loss tensor; ``optimizer_of``: loss -> the name its optimizer goes by
    in reports; ``stepped``: loss -> ``{id: tensor}`` its optimizer steps; ``groups``: the
    losses that share one optimizer (one list per optimizer), with the name that optimizer goes
    by; ``pairings``: the optimizers as given (``None`` -> one optimizer for every loss);
    ``searches`` / ``graphs``: each loss's backward graph; ``region``: node ids inside computed
    weights; ``twice``: ids of tensors the step writes in place from other trained tensors;
    ``removed``: each loss's edges into a target side or a log-probability's weight
    (:func:`~toolkit.audit.rules.targets.target_edges`: gradient no stepped tensor should get);
    ``prover``: the proof of fixes on these graphs; ``truth``: each loss's real gradients
    (:mod:`~toolkit.audit.truth.truth`), what the rules count.
    """

    losses: dict[str, torch.Tensor]
    pairings: dict[str | None, Any]
    stepped: dict[str, dict[int, torch.Tensor]]
    optimizer_of: dict[str, str]
    groups: list[tuple[str, list[str]]]
    rec: Recording
    label: Labeller
    searches: dict[str, ShortestPaths]
    graphs: dict[str, Graph]
    region: set[int]
    twice: set[int]
    allow_pass_through: bool
    allow_trained_target: bool
    all_stepped: set[int] = field(default_factory=set)
    # set by audit_step once the graphs are read (targets.target_edges, proof.Prover): the
    # rules and the proof read the recorded step, so it imports neither
    removed: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    prover: Any = None
    # optimizer -> the user's line that builds it (toolkit.audit.fixes.built), for fixes that
    # are not cuts; set by audit_step
    built: Callable[[Any], Line | None] | None = None
    # the names the step's code sees (its globals and closure) and the audit's caller's:
    # where an optimizer's parameters, written at the line that builds it, are read again
    namespace: dict[str, Any] = field(default_factory=dict)
    function: Any = None  # the step's plain function (its code: where a reset goes)
    # a script's: the file and line of the backward() that differentiates the losses (the
    # loop around it is the step's; what a statement outside that loop made, the run holds)
    loss_at: tuple[str, int] | None = None
    step: Any = None  # the step as given (a bound method's self: where it keeps state)
    # each loss's real gradients (one autograd.grad per loss): what the rules count
    truth: Truth = field(default_factory=Truth)

    def optimizer(self, loss: str) -> Any:
        """What ``loss`` is paired with, as given: an optimizer (or its param groups, a module,
        tensors)."""
        return self.pairings.get(None if None in self.pairings else loss)

    def built_at(self, pairing: Any) -> Line | None:
        """The user's line that builds the optimizer ``pairing``, when it is one and found."""
        if self.built is None or not hasattr(pairing, "param_groups"):
            return None
        return self.built(pairing)

    def unstepped(self, tensor: Any) -> bool:
        """A learned tensor no optimizer given steps: an ``nn.Parameter`` that requires
        grad."""
        return (isinstance(tensor, nn.Parameter) and tensor.requires_grad
                and id(tensor) not in self.all_stepped)

    def roots(self, loss: str) -> list[torch.Tensor]:
        """The tensors backward starts from for ``loss``."""
        return output_roots(self.losses[loss], "audit_step")


def record_step(losses: dict[str, torch.Tensor], pairings: dict[str | None, Any],
                stepped: dict[str | None, dict[int, torch.Tensor]], rec: Recording, *,
                allow_pass_through: bool, allow_trained_target: bool,
                graphs: dict[str, Graph] | None = None) -> RecordedStep:
    """Search each loss's graph once and gather what every rule reads; ``graphs``: losses'
    graphs already read (by ``name``), not read again."""
    key_of = {name: (None if None in pairings else name) for name in losses}
    by_loss = {name: stepped[key_of[name]] for name in losses}
    optimizer_of = {name: (type(pairings[None]).__name__ if None in pairings else name)
                    for name in losses}
    members: dict[int, list[str]] = {}
    for name in losses:
        members.setdefault(id(pairings[key_of[name]]), []).append(name)
    groups = [(optimizer_of[names[0]] if len(names) == 1 or None in pairings
               else "/".join(names), names) for names in members.values()]
    known = graphs or {}
    graphs = {name: known[name] if name in known else
              Graph(ShortestPaths(output_roots(loss, "audit_step")))
              for name, loss in losses.items()}
    searches = {name: graph.search for name, graph in graphs.items()}
    all_stepped = {i for group in stepped.values() for i in group}
    return RecordedStep(
        losses=losses, pairings=pairings, stepped=by_loss, optimizer_of=optimizer_of,
        groups=groups, rec=rec, label=Labeller(rec), searches=searches,
        graphs=graphs,
        region=parameter_regions(rec, set(rec.names.tensors) | all_stepped),
        twice=rec.updated_twice(), allow_pass_through=allow_pass_through,
        allow_trained_target=allow_trained_target, all_stepped=all_stepped)
