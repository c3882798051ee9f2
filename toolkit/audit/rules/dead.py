"""Dead parameters: what an optimizer steps that none of its losses reaches, and the cut that
stops it: a toolkit block (found by searching behind the cut markers), a ``detach`` / ``.data``
(a search from the tensors the step detached), a ``copy.deepcopy`` of the model (an inner loop
run on a copy), an operation whose derivative is zero (``torch.sign``, ``round``: reached, but
with a gradient of exact zeros), ``torch.no_grad()``, ``requires_grad=False``, or
no use at all."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from toolkit.audit.findings import DeadParameter, FrozenTensor
from toolkit.audit.kinds import Proof
from toolkit.audit.record.calls import COPY
from toolkit.audit.record.recording import Recording
from toolkit.audit.record.sites import LibraryCall, Line
from toolkit.audit.rules.notes import write_kind
from toolkit.audit.rules.replaced import orphans, replaced_owner
from toolkit.audit.rules.wanted import BuildAfter, FirstOf, Option, Wanted
from toolkit.audit.truth.labels import Labeller, shape_text
from toolkit.audit.truth.proof import (
    ArgumentAt,
    BuiltAt,
    CopiedAt,
    Cut,
    DetachedAt,
    IntegerAt,
    KeywordAt,
    ModeAt,
    NoGradAt,
    Place,
    ReadAt,
    ZeroDerivativeAt,
)
from toolkit.audit.truth.truth import (
    ZERO,
    ZeroPoint,
    cancelling_operand,
    vanishes,
    zero_points,
)
from toolkit.lens.backward_graph import ShortestPaths, is_cut_marker
from toolkit.lens.graph_walk import closure

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check", "find_dead"]


def find_dead(optimizer: str, losses: tuple[str, ...], roots: list[torch.Tensor],
              missing: list[torch.Tensor], rec: Recording, label: Labeller
              ) -> list[Wanted[DeadParameter]]:
    """Why each tensor of ``missing`` (stepped, never reached) gets no gradient, each finding
    with the places its fix writes (:func:`_only`)."""
    behind: ShortestPaths | None = None
    detached: ShortestPaths | None = None
    sources = {id(edge.grad_fn): (shape, how) for call, edge, shape, how in rec.detached
               if call == rec.call}
    out: list[DeadParameter] = []
    places: list[tuple[Place, ...]] = []  # what each finding's fix writes
    joining: dict[int, list[tuple[int, LibraryCall]]] = {}  # a call's line -> its findings
    for tensor in missing:
        key, path, line, where, fix, call = id(tensor), None, None, None, "", None
        checkpoint = next((c for c in rec.checkpoints.values() if key in c[1]), None)
        if not tensor.requires_grad:
            kind = "frozen"
            cut = "requires_grad=False" + (" (set by the step)" if key in rec.frozen else "")
        elif key in rec.leaf_detached and rec.leaf_detached[key] == COPY:
            kind, line = "copy", rec.sites.get(("detach", key))
            where = rec.lines.get(("detach", key))
            cut = "copy.deepcopy of the parameter: the copy is a new leaf"
            call = rec.library_calls.get(("detach", key))
            if call is not None:  # copied by a library's call whose argument decides it
                kind, line = "library_argument", f"at {call.line.file}:{call.line.number}"
                cut, fix = f"{_called_with(call)}: {call.why}", _pass_argument(call)
        elif key in rec.leaf_detached and not _read_for_a_write(rec, key):
            kind, line = "detach", rec.sites.get(("detach", key))
            where = rec.lines.get(("detach", key))
            cut = f"{rec.leaf_detached[key]} of the parameter itself"
        else:
            behind = behind or ShortestPaths(roots, through_cuts=True)
            chain = behind.path_to(tensor)
            marks = [n for n in chain or () if is_cut_marker(n)]
            if marks:
                kind = "block"
                blocks = [getattr(n, "block", None) for n in marks]
                cut = " and ".join(f"stop_gradient {b!r}" if b else "an unnamed stop_gradient"
                                   for b in dict.fromkeys(blocks))
                path = tuple(label(n) for n in chain or ())
                where = next((rec.made[id(n)][1][0] for n in marks if id(n) in rec.made), None)
            elif checkpoint is not None and id(checkpoint[0]) not in behind.nodes:
                kind = "checkpoint"
                cut = ("a reentrant torch.utils.checkpoint (use_reentrant=True) whose inputs do "
                       "not require grad: its output has no graph")
                where = rec.lines.get(("checkpoint", id(checkpoint[0])))
            else:
                if detached is None and sources:
                    edges: list[Any] = [e for call, e, _, _ in rec.detached if call == rec.call]
                    detached = ShortestPaths(edges)
                chain = detached.path_to(tensor) if detached is not None else None
                if chain:
                    shape, how = sources[id(chain[0])]
                    what, _ = label.tensor(chain[0], None)
                    cut = f"{how} of {what}{shape_text(shape)}"
                    path = ("…", *(label(n) for n in chain))
                    kind, line = "detach", rec.sites.get(("detach", rec.call, id(chain[0])))
                    where = rec.lines.get(("detach", rec.call, id(chain[0])))
                    call = rec.library_calls.get(("detach", rec.call, id(chain[0])))
                    if call is not None:  # detached by a library's call as its argument says
                        kind, fix = "library_argument", _pass_argument(call)
                        cut = f"{_called_with(call)}: {call.why}"
                elif ("no_grad", key) in rec.library_calls:
                    call = rec.library_calls[("no_grad", key)]
                    kind, where = "library_argument", call.line
                    line = f"at {call.line.file}:{call.line.number}"
                    given = f"{call.argument}=" in call.line.text
                    cut = (f"{call.package}.{call.function}(...) "
                           f"{'whose ' + call.argument + ' lacks it' if given else 'without ' + call.argument + '='}"
                           f": {call.why}; the step reads it inside that call")
                    fix = (f"pass {call.argument}= to {call.function} at "
                           f"{call.line.file}:{call.line.number}, with these tensors and "
                           "every other tensor the function should train ((*func."
                           "parameters(), ...)), or make them parameters of func")
                elif (written := _written_from_others(rec, key)) is not None:
                    kind, cut = "written", written
                elif key in rec.no_grad:
                    cut = f"torch.no_grad() (read by {rec.no_grad[key]} with gradients off)"
                    kind, line = "no_grad", rec.sites.get(("no_grad", key))
                    where = rec.lines.get(("no_grad", key))
                elif key not in rec.used:
                    kind, cut = "not_used", "not used: the step never reads it"
                elif (copied := _value_copy(rec, tensor)) is not None:
                    kind, where = "value_copy", copied
                    line = f"at {copied.file}:{copied.number}"
                    cut = ("torch.tensor(...) of a tensor computed from it: torch.tensor copies "
                           "values, never their graph")
                elif (integer := _integer_result(rec, tensor)) is not None:
                    kind, (function, where, values) = "integer_result", integer
                    line = None if where is None else f"at {where.file}:{where.number}"
                    cut = (f"{function}: an integer result made from it, whose values go on "
                           f"and whose gradient does not")
                    if values:  # max(dim=), topk: the values it picked, which no loss reads
                        cut += (f"; {function} also returned the values it picked, with their "
                                f"graph, and no loss reads them")
                        fix = (f"weight what each index selects by the value {function} "
                               f"picked for it (a router's gate: the expert's output times "
                               f"its gate value), so the gradient reaches them through those "
                               f"values; or pass the gradient straight through where the "
                               f"indices are used (a straight-through estimator); if only the "
                               f"indices are meant, leave them out of the optimizer")
                elif (taken := _first_order(rec, tensor)) is not None:
                    kind, where = "first_order", taken
                    line = None if where is None else f"at {where.file}:{where.number}"
                    cut = ("torch.autograd.grad without create_graph=True: the gradient it "
                           "takes of what these tensors compute has no graph, so the loss "
                           "made from it passes them none")
                else:
                    cut = ("no graph: the step reads it, but nothing it computes with it reaches "
                           "the loss (an output not used, .item(), an integer op)")
                    kind, line, where = ("no_graph",
                                         *_call_site(rec, rec.names.name(tensor), behind))
        # in eval mode the user decides (an estimator, or the forward's training branch)
        idle = _in_eval_mode(rec, tensor) if kind == "integer_result" else None
        place = None if where is None else (
            DetachedAt(where) if kind == "detach" else NoGradAt(where) if kind == "no_grad"
            else CopiedAt(where) if kind == "value_copy"
            else IntegerAt(where) if kind == "integer_result" and idle is None
            else KeywordAt(where, "grad", "create_graph", "True") if kind == "first_order"
            else KeywordAt(where, "checkpoint", "use_reentrant", "False")
            if kind == "checkpoint"
            else KeywordAt(where, call.function, call.argument, repr(call.value))
            if kind == "library_argument" and call is not None and call.value is not None
            else None)
        if kind == "library_argument" and call is not None and call.value is None:
            joining.setdefault(id(call.line.path), []).append((len(out), call))
        if idle is not None:
            cut, fix = (f"{cut} (in the forward of {idle}, which is in eval mode)",
                        f"{FIXES[kind]}; or, if {idle}'s forward in train mode passes a "
                        f"gradient (a Gumbel-softmax, a sampled relaxation), call {idle}.train() "
                        f"before the step")
        out.append(DeadParameter(optimizer=optimizer, parameter=rec.names.name(tensor),
                                 shape=tuple(tensor.shape), losses=losses, cut=cut, path=path,
                                 kind=kind, line=line, lines=() if where is None else (where,),
                                 fix=fix or FIXES[kind]))
        places.append(() if place is None else (place,))
    # every tensor a call's argument misses, in one edit; the finding said as advice (its
    # edit is not one of a single finding)
    for found in joining.values():
        exprs = [c.expression for _, c in found]
        joined: tuple[Place, ...] = () if "" in exprs else (ArgumentAt(
            found[0][1].line, found[0][1].function, found[0][1].argument,
            tuple(dict.fromkeys(exprs))),)
        for i, _ in found:
            places[i] = joined
    advice = {i for found in joining.values() for i, _ in found}
    return [_only(d, at, Proof.ADVICE if i in advice else None)
            for i, (d, at) in enumerate(zip(out, places, strict=True))]


def _only(finding: DeadParameter, places: tuple[Place, ...], proof: Proof | None = None
          ) -> Wanted[DeadParameter]:
    """``finding``, its fix written at ``places`` (none: its fix is said without an edit),
    stating ``proof`` (``None``: settled from its edits)."""
    return Wanted(finding, FirstOf((Option(places, finding.fix, finding.lines, proof=proof),)))


def _in_eval_mode(rec: Recording, tensor: torch.Tensor) -> str | None:
    """The outermost named module holding ``tensor`` that is in eval mode (``training`` is
    ``False``), if one is: its forward may take another branch in training (an argmax where
    training samples a relaxation)."""
    parts = rec.names.name(tensor).split(".")
    for end in range(1, len(parts)):
        label = ".".join(parts[:end])
        module = rec.names.by_label.get(label)
        if module is not None and not module.training:
            return label
    return None


def _called_with(call: LibraryCall) -> str:
    return f"{call.package}.{call.function}(..., {call.argument}={call.given!r})"


def _pass_argument(call: LibraryCall) -> str:
    return (f"pass {call.argument}={call.value!r} to {call.function} at "
            f"{call.line.file}:{call.line.number}")


#: what to do, by what stops the gradient (:attr:`DeadParameter.kind`)
FIXES = {
    "block": "let the gradient through that block where it should train these tensors "
             "(disable_blocks(name) around that use, or remove the stop_gradient)",
    "detach": "remove that .detach() (or .data) where the loss should train these tensors",
    "copy": "a copy passes no gradient back: compute the adapted weights from these tensors "
            "(torch.func.functional_call(model, {name: p - lr * g}, x), with "
            "autograd.grad(..., create_graph=True) for second order; learn2learn's "
            "clone_module; higher.innerloop_ctx(..., copy_initial_weights=False)), or copy "
            "the copy's gradients back onto them before the step (first order)",
    "cancelled": "cut the term that subtracts what it adds back (a straight-through "
                 "estimator: soft + (hard - soft).detach()): "
                 "the same values forward, the gradient of soft backward",
    "zero_derivative": "pass the gradient straight through where it is made (a "
                       "straight-through estimator): x + (torch.sign(x) - x).detach(), or "
                       "x + (torch.round(x) - x).detach(): the same values forward, the "
                       "identity's gradient backward",
    "no_grad": "compute it outside torch.no_grad() (keep no_grad for what must not train)",
    "library_argument": "pass the library call the argument that names what its backward "
                        "trains (torchdiffeq's odeint_adjoint: adjoint_params=)",
    "checkpoint": "checkpoint with use_reentrant=False, or make an input of the checkpointed "
                  "function require grad (Hugging Face models: "
                  "model.enable_input_require_grads())",
    "frozen": "requires_grad_(True) where they should train, or leave them out of the "
              "optimizer",
    "not_used": "use them in the loss, or leave them out of the optimizer",
    "value_copy": "build the value from the tensors themselves (torch.stack, torch.cat: "
                  "operations that keep the graph) where torch.tensor copies them",
    "no_graph": "make what they compute reach the loss (an output left out, .item(), an "
                "integer op), or leave them out of the optimizer",
    "integer_result": "if the loss should train them through those values, pass the "
                      "gradient straight through where the integer result is used (a "
                      "straight-through estimator: y_soft + (y_hard - y_soft).detach(), as "
                      "F.gumbel_softmax(..., hard=True) does); if only the values are meant, "
                      "leave them out of the optimizer",
    "first_order": "take that gradient with create_graph=True where the loss is computed "
                   "from it (forces as -dE/dx, a gradient penalty, an inner step): the "
                   "gradient then has a graph back to these tensors",
    "written": "leave them out of the optimizer: the step updates them itself (an EMA "
               "teacher, a target network's copy), and no loss should train them",
}


def _written_from_others(rec: Recording, key: int) -> str | None:
    """How the step writes the watched tensor ``key`` from other tensors (an EMA teacher, a
    copy of the online network), when it does: a tensor the step itself updates, which no
    gradient should."""
    write = rec.writes.get(key)
    if write is None or not (write.sources or write.copy_of is not None):
        return None
    _, ops, _ = write_kind(rec, write)
    what = "an average of itself and other tensors" if write.is_average else \
        "a copy of another tensor" if write.copy_of is not None else \
        "recomputed from other tensors"
    return f"written in place by the step ({what}: {ops}), never by a gradient"


def _read_for_a_write(rec: Recording, key: int) -> bool:
    """Whether the step read the watched tensor ``key`` with gradients on, and also detached
    it (``.data``) as the source of an in-place write (an EMA of it): the detach made the
    write's value, not the cut that keeps it from the loss."""
    return key in rec.grad_read and any(key in w.sources for w in rec.writes.values())


def _integer_result(rec: Recording, tensor: torch.Tensor
                    ) -> tuple[str, Line | None, bool] | None:
    """``(the function, the user's line, whether it also returned values with a graph)`` of
    this call's first integer or boolean result (``argmax``, a comparison) computed from
    ``tensor``: what the step does with its values, with no gradient back."""
    for call, edges, function, line, values in rec.integer_results:
        if call == rec.call and edges and ShortestPaths(edges).path_to(tensor):
            return function, line, values
    return None


def _first_order(rec: Recording, tensor: torch.Tensor) -> Line | None:
    """The user's line of this call's first ``torch.autograd.grad`` without
    ``create_graph=True`` that differentiated a value computed from ``tensor``."""
    for call, edges, line in rec.first_order_calls:
        if call == rec.call and edges and ShortestPaths(edges).path_to(tensor):
            return line
    return None


def _value_copy(rec: Recording, tensor: torch.Tensor) -> Line | None:
    """The user's line where this call's ``torch.tensor(...)`` copied a tensor computed from
    ``tensor`` (or ``tensor`` itself): the copy is a new tensor with no graph."""
    for call, dropped, line in rec.value_copies:
        if call != rec.call or line is None:
            continue
        for t in dropped:
            if t is tensor:
                return line
            if t.grad_fn is not None and any(
                    getattr(n, "variable", None) is tensor
                    for n in closure([t.grad_fn], lambda n: [x for x, _ in n.next_functions
                                                             if x is not None])):
                return line
    return None


def _call_site(rec: Recording, name: str, behind: ShortestPaths
               ) -> tuple[str | None, Line | None]:
    """Where the analysed call called the outermost named module holding ``name`` of which
    no parameter is reached (BERT's ``bert.pooler``, not ``bert``): the output left out."""
    reached = [n for i in behind.leaf_node if (n := rec.names.tensors.get(i))]
    parts = name.split(".")
    for end in range(1, len(parts)):
        label = ".".join(parts[:end])
        if any(n.startswith(f"{label}.") for n in reached):
            continue
        site = rec.sites.get(("call", rec.call, label))
        if site is not None:
            return site, rec.lines.get(("call", rec.call, label))
    return None, None


#: backward nodes of functions whose derivative is zero wherever it exists: a tensor reached
#: only through them gets a gradient of exact zeros (``torch.sign`` without a straight-through
#: estimator, a rounding in quantisation-aware training)
ZERO_DERIVATIVE = frozenset({"SignBackward0", "RoundBackward0", "RoundBackward1",
                             "FloorBackward0", "CeilBackward0", "TruncBackward0"})


def _zero_nodes(step: RecordedStep, loss: str) -> frozenset[int]:
    return frozenset(key for key, node in step.searches[loss].nodes.items()
                     if type(node).__name__ in ZERO_DERIVATIVE)


def _through_zeros(step: RecordedStep, members: list[str], missing: list[torch.Tensor]
                   ) -> list[Wanted[DeadParameter]]:
    """Dead in effect: each tensor of ``missing`` that the losses reach only through
    zero-derivative nodes, with the first such node and the user's line that made it."""
    rec, label = step.rec, step.label
    out = []
    for tensor in missing:
        key = id(tensor)
        for name in members:
            search, graph = step.searches[name], step.graphs[name]
            zeros = _zero_nodes(step, name)
            leaf = search.leaf_node.get(key)
            if leaf is None or not zeros:
                continue
            # the zero nodes the loss meets first on its way (not behind another zero node),
            # and of those the ones that reach the tensor through no other zero node (its own
            # sign, not the next layer's sign of what it computes)
            front = step.prover.reach(name, graph.roots, Cut(dead=zeros)) & zeros
            latest = sorted(front, key=lambda z: -search.nodes[z]._sequence_nr())
            node_id = next((z for z in latest if leaf in step.prover.reach(
                name, [z], Cut(dead=zeros - {z}))), None) or next(
                (z for z in latest if leaf in graph.reach([z])), None)
            if node_id is None:
                continue
            node = search.nodes[node_id]
            entry = rec.made.get(node_id)
            where = entry[1][0] if entry is not None and entry[0] is node else None
            op = label(node)
            out.append(_only(DeadParameter(
                optimizer=step.optimizer_of[name], parameter=rec.names.name(tensor),
                shape=tuple(tensor.shape), losses=tuple(members),
                cut=f"{op}: its derivative is zero wherever it is defined, so the gradient "
                    f"that reaches it is exactly zero",
                path=tuple(label(n) for n in search.path_to(tensor) or ()),
                kind="zero_derivative", lines=() if where is None else (where,),
                fix=FIXES["zero_derivative"]), () if where is None else (ZeroDerivativeAt(where),)))
            break
    return out


def _zeroed(step: RecordedStep, members: list[str], tensors: list[torch.Tensor]
            ) -> list[Wanted[DeadParameter]]:
    """Dead in effect, as a real backward shows: each of ``tensors`` is reached and gets a
    gradient of exact zeros on both calls, because gradients cancel on the way (``soft +
    (hard - soft)``: a straight-through line without its cut), found by one hooked backward
    per loss (:func:`~toolkit.audit.truth.truth.zero_points`), or because an operation
    on the way passes zero for any values (``grid_sample(mode="nearest")`` to its grid,
    :func:`~toolkit.audit.truth.truth.vanishes`). Zero for every value, by the
    structure of the step; a zero that holds only for these values (a ReLU or a clamp on its
    flat side, a multiplication by a weight that is zero at initialisation) is no finding, nor
    are reads of the tensor itself that cancel (the loss does not depend on it)."""
    rec, label, out = step.rec, step.label, []
    left = {id(t): t for t in tensors}
    for name in members:
        search, graph = step.searches[name], step.graphs[name]
        mine = {i: t for i, t in left.items() if i in search.leaf_node
                and step.truth.second[name].get(i) == ZERO}
        if not mine:
            continue
        leaf_of = {i: search.leaf_node[i] for i in mine}
        every = graph.useful(set(leaf_of.values()), set(search.nodes))
        points = zero_points(step.losses[name], search, graph.callers, every, mine, leaf_of)
        for i, tensor in mine.items():
            point = points.get(i)
            # zero only for these values (a clamp on its flat side, a weight at zero such as
            # SAGAN's gamma at init: a node that passes zero), or the tensor's own reads
            # cancel (the loss is invariant to it: a bias under a difference of means): it
            # trains once the values move, or never needs to; no finding
            if point is None or (point.kind != "cancelled" and not all(
                    vanishes(n, point.node) for n in point.givers)):
                continue
            kind = point.kind
            cut, lines, places = (_cancellation(step, point) if kind == "cancelled"
                                  else _vanishing(step, point))
            fix = FIXES["cancelled"] if kind == "cancelled" else FIXES[kind]
            options = (Option(places, fix, lines),)
            if kind != "cancelled" and places:  # with the mode's edit: said so
                options = (Option(places, "use a mode of it whose derivative is not zero (the "
                                          "function's default)", lines, places), *options)
            out.append(Wanted(DeadParameter(
                optimizer=step.optimizer_of[name], parameter=rec.names.name(tensor),
                shape=tuple(tensor.shape), losses=tuple(members), cut=cut,
                path=tuple(label(n) for n in search.path_to(tensor) or ()), kind=kind,
                lines=lines, fix=fix), FirstOf(options)))
            del left[i]
    return out


def _vanishing(step: RecordedStep, point: ZeroPoint
               ) -> tuple[str, tuple[Line, ...], tuple[Place, ...]]:
    """``(the cut in words, the user's line, where its edit goes)`` of an operation whose
    derivative to ``point.node`` is zero for any values: the line that made it, and the
    call's mode keyword back to the function's default where one names it."""
    rec, label = step.rec, step.label
    ops = " and ".join(label(n) for n in point.givers)
    cut = (f"{ops}: its derivative to {label(point.node)} is zero for any values (run again "
           f"at random inputs), so the gradient that reaches it is exactly zero on both calls")
    lines = tuple(entry[1][0] for n in point.givers
                  if (entry := rec.made.get(id(n))) is not None and entry[0] is n)
    return cut, lines, (ModeAt(lines[0]),) if len(lines) == 1 else ()


def _cancellation(step: RecordedStep, point: ZeroPoint
                  ) -> tuple[str, tuple[Line, ...], tuple[Place, ...]]:
    """``(the cut in words, the user's line, where its edit goes)`` of gradients that cancel at
    ``point.node``: the line of the highest node that passes it gradient (the ``+`` of ``a +
    (b - a)``), and the cut of that node's operand through which the other givers pass it
    theirs (``a + (b - a).detach()``): the same values forward, ``a``'s gradient back."""
    rec, label = step.rec, step.label
    top, position = cancelling_operand(point)
    cut = (f"the gradients {' and '.join(label(n) for n in point.givers)} pass to "
           f"{label(point.node)} cancel exactly (a + (b - a) without a cut): reached, with a "
           f"gradient of exact zeros on both calls")
    entry = rec.made.get(id(top))
    where = entry[1][0] if entry is not None and entry[0] is top else None
    if where is None:
        return cut, (), ()
    return cut, (where,), () if position is None else (ReadAt(where, position),)


def check(step: RecordedStep) -> Found:
    """The rule, per optimizer: what it steps that none of its losses reaches (dead when it
    requires grad, frozen information when it does not), or reaches only through
    zero-derivative operations (dead in effect)."""
    rec, truth = step.rec, step.truth
    dead: list[Wanted[DeadParameter]] = []
    frozen: list[FrozenTensor] = []
    for optimizer, members in step.groups:
        params = step.stepped[members[0]]
        reached = {i for name in members for i in step.searches[name].leaf_node}
        reached |= {i for name in members for node, reads in rec.checkpoints.values()
                    if id(node) in step.searches[name].nodes for i in reads}
        # what a real backward trains (None: not known, the graph walk decides)
        trains = {i: truth.trains(members, i) for i in params}
        zeros = {name: _zero_nodes(step, name) for name in members}
        explained: list[Wanted[DeadParameter]] = []
        if any(zeros.values()):  # reached with a gradient that is not exactly zero
            alive = {i for name in members for i in step.searches[name].leaf_node
                     if step.searches[name].leaf_node[i] in step.prover.reach(
                         name, step.graphs[name].roots, Cut(dead=zeros[name]))}
            effect = [p for i, p in params.items() if i in reached and i not in alive
                      and p.requires_grad and trains[i] is not True]
            explained = _through_zeros(step, members, effect)
        # reached, and a real backward gives them exact zeros on both calls: where they cancel
        named = {d.finding.parameter for d in explained}
        zeroed = [p for i, p in params.items() if trains[i] is False and i in reached
                  and p.requires_grad and rec.names.name(p) not in named
                  and truth.zero_only(members, i)]
        dead += explained + _zeroed(step, members, zeroed)
        for i, p in params.items():
            if not p.requires_grad and i not in reached:
                how, read = _written(rec, p)
                frozen.append(FrozenTensor(optimizer, rec.names.name(p), tuple(p.shape), how,
                                           i in rec.frozen, read))
        # not reached by the walk, or reached and given no gradient at all by autograd
        missing = [p for i, p in params.items() if p.requires_grad and trains[i] is not True
                   and (i not in reached or (trains[i] is False
                                             and not truth.zero_only(members, i)))]
        if missing:
            roots = [t for name in members for t in step.roots(name)]
            found = find_dead(optimizer, tuple(members), roots, missing, rec, step.label)
            found = _other_readers(step, members, _replaced(step, members, found))
            dead += _left_out(step, members, params, found)
    return {"dead": dead, "frozen": frozen}


def _other_readers(step: RecordedStep, members: list[str], found: list[Wanted[DeadParameter]]
                   ) -> list[Wanted[DeadParameter]]:
    """A ``.detach()`` removed for these losses also hands every other loss that reads the
    value it cut a gradient into these tensors: each such read gets a cut of its own, where
    the step's code first read the detached value (pix2pix's ``fake_B = netG(real_A)``, read
    detached by the discriminator's loss and with its graph by the generator's), or the fix
    is said without an edit; all of it only where the ``.detach()`` can be removed."""
    rec, out = step.rec, []
    for wanted in found:
        d = wanted.finding
        if d.kind != "detach" or not d.lines:
            out.append(wanted)
            continue
        where = d.lines[0]
        tensor = next((t for i, t in rec.names.objects.items()
                       if rec.names.tensors.get(i) == d.parameter), None)
        cuts: list[ReadAt | None] = []
        reads: list[Line] = []
        readers: list[str] = []
        for call, edge, node, read in rec.detached_reads:
            made = rec.lines.get(("detach", call, id(edge.grad_fn)))
            if call != rec.call or made is None or (made.path, made.number) != (
                    where.path, where.number):
                continue
            others = [loss for loss in step.losses if loss not in members
                      and id(node) in step.searches[loss].nodes
                      and (tensor is None or id(tensor) not in step.stepped[loss])]
            # a read these losses also train through (fake_AB = cat(..., fake_B), read by
            # both): a cut there would keep these tensors dead too
            shared = read is None or any(
                r == read and c == call and any(id(n) in step.searches[m].nodes for m in members)
                for c, e, n, r in rec.detached_reads if e.grad_fn is edge.grad_fn)
            if others:
                cuts.append(None if shared else ReadAt(*read))  # type: ignore[misc]
                reads += [] if read is None or read[0] in reads else [read[0]]
                readers += [loss for loss in others if loss not in readers]
        if not cuts:
            out.append(wanted)
            continue
        at = ", ".join(f"{x.file}:{x.number}" for x in reads)
        who = ", ".join(map(repr, readers))
        removed: tuple[Place, ...] = (DetachedAt(where),)
        lines = (*d.lines, *reads)
        # the .detach() removed and every read cut; else, the .detach() removed, the read's
        # cut said without an edit; else (the .detach() not removed) the finding as it is
        options = [Option((), f"{d.fix}; and cut it on loss {who}'s side only, after the value "
                              f"the losses share{f' (at {at})' if at else ''}: the .detach() "
                              f"kept it from these tensors", lines, removed),
                   Option((), d.fix, d.lines)]
        if all(c is not None for c in cuts):
            both = (*removed, *cuts)
            options.insert(0, Option(both, f"{d.fix}; and cut it where loss {who} reads it"
                                           f"{f' (at {at})' if at else ''}, which the "
                                           f".detach() kept from these tensors", lines, both))
        out.append(Wanted(d, FirstOf(tuple(options))))
    return out


def _replaced(step: RecordedStep, members: list[str], found: list[Wanted[DeadParameter]]
              ) -> list[Wanted[DeadParameter]]:
    """The tensors of a module replaced after the optimizer was built (never read, held by no
    module: :mod:`toolkit.audit.rules.replaced`), with that fix: build the optimizer after the
    replacement."""
    for loss in members:
        old = orphans(step, loss)
        names = {step.rec.names.name(step.rec.names.objects[i]) for i in old
                 if i in step.rec.names.objects}
        if not any(d.finding.kind == "not_used" and d.finding.parameter in names
                   for d in found):
            continue
        owner = next((o for v in step.graphs[loss].search.leaf_node
                      if (o := replaced_owner(step, loss, step.rec.names.objects.get(v)))),
                     None)
        # with no replaced module: a replaced parameter has the make of the one now held in
        # its place (weights tied after the optimizer was built), a loose tensor none
        makes = {(tuple(t.shape), t.dtype) for root in step.rec.names.roots
                 for t in root.parameters()}
        if owner is None and not any((tuple(t.shape), t.dtype) in makes for i in old
                                     if (t := step.stepped[loss].get(i)) is not None):
            continue
        cut = ("held by no module now: " + (f"the module {owner} replaced them after the "
               "optimizer was built" if owner is not None else
               "what held them was replaced after the optimizer was built"))
        # the fix, its line and its edits: where the optimizer's statement moves (said as
        # advice, as the finding was without them)
        return [Wanted(dataclasses.replace(d.finding, kind="replaced", cut=cut, line=None),
                       BuildAfter(loss, owner, Proof.ADVICE))
                if d.finding.kind == "not_used" and d.finding.parameter in names else d
                for d in found]
    return found


def _left_out(step: RecordedStep, members: list[str], params: dict[int, torch.Tensor],
              found: list[Wanted[DeadParameter]]) -> list[Wanted[DeadParameter]]:
    """Tensors stepped in vain (not used, or used for nothing that reaches the loss): the
    fix that leaves them out of the optimizer, as an edit of the line that builds it (where
    it can be written)."""
    idle = [d for d in found if d.finding.kind in ("no_graph", "not_used", "written")]
    if not idle:
        return found
    wanted = {d.finding.parameter for d in idle}
    pairing = step.optimizer(members[0])
    left = tuple(t for t in params.values() if step.rec.names.name(t) in wanted)
    line = step.built_at(pairing) if left else None
    if line is None:
        return found
    where = f"{line.file}:{line.number}"
    built: tuple[Place, ...] = (BuiltAt(line, pairing, left),)
    return [Wanted(d.finding, FirstOf((
        Option(built, f"{d.finding.fix} (built at {where})", d.finding.lines, built,
               proof=Proof.ADVICE),  # said as advice, as the finding was without its edit
        *d.fix.options)))  # type: ignore[union-attr]
        if d in idle else d for d in found]


def _written(rec: Recording, tensor: torch.Tensor) -> tuple[str | None, tuple[str, ...]]:
    """``(what kind of write and by which functions, what it read)`` for a frozen tensor."""
    write = rec.writes.get(id(tensor))
    if write is None:
        return None, ()
    kind, ops, sources = write_kind(rec, write)
    return f"{kind} ({ops})", tuple(sources)
