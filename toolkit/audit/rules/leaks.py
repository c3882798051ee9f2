"""The step audit's leaks: which tensors a loss's gradient reaches beyond its optimizer, and
whether that gradient is a by-product of training the stepped tensors.

A loss's backward graph (the :class:`~toolkit.lens.backward_graph.ShortestPaths` search from the
loss, stopping at cuts) reaches leaves. A leaf the loss's optimizer does not step is a
*candidate*; it is **pass-through** (information) or a **leak** (a failure), decided on the
graph:

- A parameter and the nodes that compute a layer's weight from stored tensors (``parametrize``,
  the ``spectral_norm`` / ``weight_norm`` hooks, a weight computed in a module's own forward,
  views of them) form the parameter's *region*: no cut goes there. ``P(L)`` are the nodes that
  read the region of ``L`` (the layers that use it).
- The *legitimate* graph is the loss's graph without the edges into the target side of a
  recognised comparison or the weight of a log-probability (:mod:`toolkit.audit.rules.targets`):
  gradient through those is never what trains the stepped tensors (``(R − V).detach()``).
- ``L`` is pass-through when a node of ``P(L)`` lies on a legitimate path from the loss to a
  stepped tensor: every cut that removes ``L``'s gradient also cuts that path, i.e. changes
  what the stepped tensors are trained by (the discriminator in a generator step, the critic
  in an actor step).
- ``L`` is also pass-through when the loss reaches it only through the outputs of calls of a
  module that holds ``L`` and none of the stepped tensors, outputs that lie on legitimate
  paths: a cut that spares the stepped tensors would have to sit inside that module's own
  forward, on a branch the module computes for every caller (the state branch of a DDPG
  critic that reads the action at its second layer, the class embedding of a projection
  discriminator). Nothing in the step's own code can remove it; freezing the module can.
- ``L`` is a learned tensor left out of the optimizer when it is an ``nn.Parameter`` that no
  optimizer given steps, held by a module whose other tensors the loss's optimizer steps (a
  learned temperature, ELMo's layer weights): a leak whose fix is no cut but "add it to the
  optimizer built at" the user's line (:mod:`toolkit.audit.fixes.built`). So is a parameter
  no optimizer steps that no cut in the step's code can spare, a tensor kept in a plain list,
  dict or attribute of the model the optimizer is built from, and a plain leaf that requires
  grad which the step combines only in its own arithmetic (a PDE's coefficients): those are
  registered where they are made (:mod:`toolkit.audit.fixes.registration`).
- An addition or subtraction the step's own code makes (``w - w_anchor``) does not pass the
  gradient of what else it reads through ``L``: a reader of that kind makes no pass-through,
  and ``L`` detached where it is read is the cut.
- Otherwise ``L`` is a leak, and the suggested cut is on its shortest path, at the first node
  that is on no legitimate path to a stepped tensor.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from torch import nn

from toolkit.audit.findings import Leak
from toolkit.audit.record.recording import Recording
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unregistered import closure_names, kept, model_of, unregistered
from toolkit.audit.rules.replaced import replaced_owner
from toolkit.audit.rules.wanted import BuildAfter, CutAt, FirstOf, Option, Wanted
from toolkit.audit.truth.cuts import first_outside, leak_cut
from toolkit.audit.truth.graph import Graph
from toolkit.audit.truth.labels import VIEWS, owners
from toolkit.audit.truth.proof import (
    BuiltAt,
    Cut,
    DetachedAt,
    JoinedAt,
    Place,
    Prover,
    RecomputedAt,
    RegisteredAt,
)
from toolkit.lens.backward_graph import node_label
from toolkit.lens.graph_walk import closure

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["check", "find_leaks", "passes_through"]


def find_leaks(step: RecordedStep, loss: str, removed: set[tuple[int, int]]
               ) -> tuple[list[Leak | Wanted[Leak]], list[Leak]]:
    """``(leaks, pass_through)`` of one loss: see the module's docstring and :class:`Leak`. A
    leak whose fix writes edits comes wrapped in :class:`~toolkit.audit.rules.wanted.Wanted`
    with where they go (the fixes stage writes them; a pass-through never has edits).

    ``removed``: the edges into targets and log-probability weights (not legitimate paths).
    """
    optimizer, graph, rec, label = step.optimizer_of[loss], step.graphs[loss], step.rec, step.label
    stepped, region, twice = set(step.stepped[loss]), step.region, step.twice
    search = graph.search
    names = rec.names
    candidates = []
    for var_id, key in search.leaf_node.items():
        variable = search.nodes[key].variable
        known = var_id in names.tensors or isinstance(variable, nn.Parameter)
        # a real backward gives it no gradient (a node that returns none for it): no leak
        real = not step.truth.known(loss) or step.truth.reaches(loss, var_id)
        if known and real and (var_id not in stepped or var_id in twice):
            candidates.append(variable)
    if not candidates:
        return [], []
    # what trains the stepped tensors (a tensor also written in place is left out, unless it
    # is all the loss reaches)
    targets = ({search.leaf_node[i] for i in stepped if i in search.leaf_node and i not in twice}
               or {search.leaf_node[i] for i in stepped if i in search.leaf_node})
    legit = graph.useful(targets, graph.reach(graph.roots, removed), removed)
    order = {key: i for i, key in enumerate(names.tensors)}
    candidates.sort(key=lambda v: order.get(id(v), len(order)))
    calls = _passed_calls(graph, legit, rec, stepped)
    model = model_of(step.optimizer(loss), step.built_at(step.optimizer(loss)), step.namespace)
    learned = {id(v) for v in candidates if id(v) not in step.all_stepped and (
        (model is not None and kept(model[0], v) is not None) or _loose(step, graph, v))}
    skip = (f"to skip computing it, freeze it while computing loss {loss!r} "
            "(requires_grad_(False), as Lightning's toggle_optimizer does) or differentiate "
            "only the stepped tensors (backward(inputs=...))")
    leaks: list[Leak | Wanted[Leak]] = []
    passing: list[Leak] = []
    known: list[Cut] = []
    # the ways to take the tensors written twice out of the optimizer, one tried each time
    # the cuts known changed, in that order (the first written is the fix)
    left_out: list[Option] = []
    tried = -1
    for variable in candidates:
        chain = search.path_to(variable) or []
        lines: tuple[Line, ...] = ()
        wanted: CutAt | FirstOf | BuildAfter | None = None
        inside = None
        kind = "optimizer"  # the fix is at the optimizer's line, unless set otherwise below
        replaced = replaced_owner(step, loss, variable) if targets else None
        if id(variable) in stepped:
            reason = (f"stepped by optimizer {optimizer!r} and also written in place by the "
                      f"step ({rec.written[id(variable)]}): updated twice")
            through = False
        elif replaced is not None or (targets and (_sibling_left_out(step, variable)
                                                   or id(variable) in learned)):
            reason = f"not stepped by optimizer {optimizer!r}"  # the optimizer's fix, no cut
            through = False
        else:
            reason = f"not stepped by optimizer {optimizer!r}"
            leaf = search.leaf_node[id(variable)]
            through = bool((_users(graph, leaf, region) - _read_apart(step, graph, leaf, removed))
                           & legit)
            if not through:
                inside = _only_inside(graph, leaf, id(variable), calls)
                through = inside is not None
        if inside is not None:
            kind = "pass_through"
            cut_at, fix = None, (
                f"reached only through the output of {inside}, which trains optimizer "
                f"{optimizer!r}'s tensors: only a cut inside {inside}'s own forward could "
                f"remove it; {skip}")
        elif through:
            kind = "pass_through"
            cut_at, fix = None, (
                "no cut can remove it: every cut that does also cuts a path by which "
                f"optimizer {optimizer!r}'s tensors are trained; {skip}")
            if _inside_trained(step, loss, variable):  # meant to train, or not
                kind = "unstepped"
                built = step.built_at(step.optimizer(loss))
                lines = () if built is None else (built,)
                fix = (f"no optimizer given steps it: if it should train, add it to optimizer {optimizer!r}"
                       f"{'' if built is None else f' (built at {built.file}:{built.number})'}"
                       f"; {fix}")
        elif id(variable) in stepped:
            kind = "written"
            line = rec.lines.get(("write", id(variable)))
            cut_at, fix, lines = None, (
                f"write it in one way only: remove the in-place write "
                f"({rec.written[id(variable)]}) or take it out of optimizer {optimizer!r}"), (
                () if line is None else (line,))
            if tried != len(known):  # tried again only with other cuts known
                tried = len(known)
                option = _take_out(step, loss, candidates, stepped, legit, targets, known)
                if option is not None:
                    left_out.append(option)
            if left_out:
                wanted = FirstOf((*left_out, Option((), fix, lines)))
        elif replaced is not None:
            cut_at, fix, wanted = None, "", BuildAfter(loss, replaced)
        elif (fed := _fed_detached(step, loss, names.name(variable), targets)) is not None:
            kind = "detached"
            cut_at, (fix, lines, wanted) = None, fed
        elif targets and (_sibling_left_out(step, variable) or id(variable) in learned):
            cut_at, (fix, lines, wanted) = None, _add_to_optimizer(step, loss, [
                v for v in candidates if _sibling_left_out(step, v) or id(v) in learned])
        elif targets and _called_by_trained(step, variable):
            cut_at, (fix, lines, wanted) = None, _add_to_optimizer(step, loss, [
                v for v in candidates if _called_by_trained(step, v)], called=True)
        else:
            kind, cut_at, fix, lines, wanted = _fix(step, loss, chain, legit, targets,
                                                    search.leaf_node[id(variable)], known)
            if kind == "no_cut" and targets and step.unstepped(variable):
                # meant to train, or meant to stay fixed (a base layer under an adapter):
                # either fix is one line, neither is known, so none is written
                kind = "optimizer"
                fix, lines, wanted = _add_to_optimizer(step, loss, [variable], either=True)
        leak = Leak(loss=loss, optimizer=optimizer, parameter=names.name(variable),
                    shape=tuple(variable.shape),
                    grad_bytes=variable.numel() * variable.element_size(),
                    path=tuple(label(n) for n in chain), reason=reason, fix=fix, cut_at=cut_at,
                    lines=lines, kind=kind)
        if through:
            passing.append(leak)
        else:
            leaks.append(leak if wanted is None else Wanted(leak, wanted))
    return _owned(leaks), passing


def _passed_calls(graph: Graph, legit: set[int], rec: Recording, stepped: set[int]
                  ) -> list[tuple[int, str, frozenset[int]]]:
    """``(node, module, its tensors)`` for each module call output on a legitimate path,
    returned by a module that holds none of the stepped tensors (the critic in an actor step)."""
    found, members = [], {}
    for key in legit:
        for module in rec.returned_by.get(key, ()):
            if module not in members:
                owned = rec.names.members(module)
                members[module] = owned if owned and not owned & stepped else None
            if members[module] is not None:
                found.append((key, module, members[module]))
    return found


def passes_through(step: RecordedStep, loss: str, left: set[int]) -> bool:
    """Whether each tensor of ``left`` (ids) that ``loss`` reaches would be pass-through,
    were ``loss``'s optimizer not to step it: the gradient must pass it to reach the other
    tensors that optimizer steps (a head behind the body a model-wide optimizer trains), so
    leaving it out of that optimizer is no leak."""
    graph, search = step.graphs[loss], step.graphs[loss].search
    stepped = {i for i in step.stepped[loss] if i not in left}
    reached = [i for i in left if i in search.leaf_node]
    if not reached:
        return True
    targets = {search.leaf_node[i] for i in stepped if i in search.leaf_node}
    if not targets:
        return False
    removed = step.removed.get(loss, set())
    legit = graph.useful(targets, graph.reach(graph.roots, removed), removed)
    calls = _passed_calls(graph, legit, step.rec, stepped)
    return all(bool(_users(graph, search.leaf_node[i], step.region) & legit)
               or _only_inside(graph, search.leaf_node[i], i, calls) is not None
               for i in reached)


def _only_inside(graph: Graph, leaf: int, var_id: int,
                 calls: list[tuple[int, str, frozenset[int]]]) -> str | None:
    """The module whose legitimate outputs are the loss's only way to the tensor ``var_id``
    (leaf node ``leaf``), when there is one: see the module's docstring."""
    mine = [(key, module) for key, module, members in calls if var_id in members]
    if not mine:
        return None
    removed = {(key, child) for key, _ in mine for child in graph.children.get(key, ())}
    if leaf in graph.reach(graph.roots, removed):
        return None
    return min((module for _, module in mine), key=len)


def _users(graph: Graph, leaf: int, region: set[int]) -> frozenset[int]:
    """``P(L)``: the activation nodes that read the region of the leaf node ``leaf`` (the
    computed weights it is part of, and views of them)."""
    nodes = graph.search.nodes
    inside = closure([leaf], lambda k: [c for c in graph.callers.get(k, ())
                                        if c in region or node_label(nodes[c]) in VIEWS])
    return frozenset(c for k in inside for c in graph.callers.get(k, ()) if c not in inside)


#: operations whose gradient to their other inputs does not depend on one input's value
_ADDED = frozenset({"Add", "Sub", "Rsub"})


def _read_apart(step: RecordedStep, graph: Graph, leaf: int, removed: set[tuple[int, int]]
                ) -> frozenset[int]:
    """The readers of the leaf node ``leaf`` that the step's own code made (outside every
    module's forward), reading it added or subtracted (``w - w_global``) or as the target side
    of a comparison: the gradient of what else they read does not pass through the tensor, and
    ``tensor.detach()`` where they read it spares every other path (the proximal anchor of
    FedProx, kept as the global model's own parameters)."""
    nodes, made = graph.search.nodes, step.rec.made
    return frozenset(c for c in graph.callers.get(leaf, ())
                     if (entry := made.get(c)) is not None and entry[0] is nodes[c]
                     and entry[2] == "op"
                     and (node_label(nodes[c]) in _ADDED or (c, leaf) in removed))


def _fed_detached(step: RecordedStep, loss: str, name: str, targets: set[int]
                  ) -> tuple[str, tuple[Line, ...], FirstOf | None] | None:
    """When ``loss`` reaches the module holding ``name`` through a call fed a detached tensor
    whose graph reaches what the loss trains (a generator step reading ``D(G(z).detach())``):
    the advice to remove that detach (the term gives the stepped tensors no gradient, and
    the module is then only passed through), with its line and where its edits go. Another
    loss that reads a value that line made (a discriminator loss reusing the generator step's
    ``fake_out``) keeps it detached: it reads the expression again, as the line wrote it."""
    rec, graph = step.rec, step.graphs[loss]
    for (call, module), cuts in rec.detached_into.items():
        if call != rec.call or not name.startswith(f"{module}."):
            continue
        for edge, line in cuts:
            source = id(edge.grad_fn)
            if source in graph.search.nodes and graph.reach([source]) & targets:
                held = sorted(n for i in step.stepped[loss]
                              if graph.search.leaf_node.get(i) in graph.reach([source])
                              and (n := rec.names.tensors.get(i)))
                fix = (f"{module} reads a detached tensor here, so this term gives "
                       f"{owners(held) if held else 'the stepped tensors'} no gradient: "
                       "remove the .detach() (then its gradient passes through "
                       f"{module}, which is information)")
                if line is None:
                    return fix, (), None
                kept_at, others, readers = _others_keep_detached(step, loss, line)
                if others:
                    fix += (f"; loss {', '.join(repr(o) for o in others)} reads what that line "
                            f"computes: write that expression again where it reads it, "
                            f"keeping its .detach()")
                # the detach removed, and the other losses' operands written again: all or none
                places: tuple[Place, ...] = (DetachedAt(line), *kept_at)
                return fix, (line, *readers), FirstOf((Option(places, fix,
                                                              (line, *readers)),))
    return None


def _others_keep_detached(step: RecordedStep, loss: str, line: Line
                          ) -> tuple[list[RecomputedAt], list[str], list[Line]]:
    """For each other loss that reads a value made at the detach's ``line``: where it is
    recomputed, at that loss's operation that reads it, the loss, and the line of that
    operation."""
    rec = step.rec
    made = [n for n in rec.made_at.get((line.path, line.number), ())
            if rec.made.get(id(n), (None,))[0] is n]
    edits: list[RecomputedAt] = []
    others, readers = [], []
    for other, graph in step.graphs.items():
        if other == loss:
            continue
        for node in made:
            for parent in graph.callers.get(id(node), ()):
                entry = rec.made.get(parent)
                reader = graph.search.nodes[parent]
                if entry is None or entry[0] is not reader or entry[2] != "op" \
                        or entry[1][0] == line:
                    continue
                position = next(i for i, (n, _) in enumerate(reader.next_functions)
                                if n is node)
                where = next(x for x in rec.made[id(node)][1] if x == line)
                edits.append(RecomputedAt(entry[1][0], position, where))
                others.append(other)
                readers.append(entry[1][0])
    return edits, list(dict.fromkeys(others)), list(dict.fromkeys(readers))


def _take_out(step: RecordedStep, loss: str, candidates: list[Any], stepped: set[int],
              legit: set[int], targets: set[int], known: list[Cut]) -> Option | None:
    """The fix of tensors the optimizer steps while the step writes them from others (an EMA
    teacher in the student's optimizer): out of the optimizer, at the line that builds it,
    and, since the loss reaches them, the cut that keeps its gradient from them once they
    are not stepped; ``None`` unless each is found. Chosen only where every edit is written
    (it needs what it writes)."""
    twice = [v for v in candidates if id(v) in stepped]
    pairing = step.optimizer(loss)
    line = step.built_at(pairing) if twice else None
    if line is None or not targets:
        return None
    search = step.graphs[loss].search
    out = {id(v) for v in twice}  # the cut is proved on the step as it will be: without them
    after = dataclasses.replace(step, stepped={name: {i: t for i, t in group.items()
                                                      if i not in out}
                                               for name, group in step.stepped.items()})
    prover = Prover(after)
    cuts: list[Cut] = []
    for v in twice:
        leaf = search.leaf_node[id(v)]
        cut = leak_cut(after, prover, loss, leaf, legit, [*known, *cuts])
        if cut is None:
            return None
        if cut not in cuts:
            cuts.append(cut)
    where = f"{line.file}:{line.number}"
    texts = "; ".join(dict.fromkeys(t for c in cuts for t in c.texts))
    fix = (f"take them out of optimizer {step.optimizer_of[loss]!r} (built at {where}), which "
           f"the in-place write already updates; and, since loss {loss!r} reaches them: {texts}")
    lines = (line, *dict.fromkeys(x for c in cuts for x in c.lines))
    places: tuple[Place, ...] = (BuiltAt(line, pairing, tuple(twice)),
                                 *(site for c in cuts for site in c.sites))
    return Option(places, fix, lines, places)


def _inside_trained(step: RecordedStep, loss: str, variable: Any) -> bool:
    """Stepped by no optimizer given, inside a module whose other tensors the loss's
    optimizer steps (an encoder layer unfrozen after the optimizer was built from the tensors
    that required grad then): maybe meant to train. A network of its own (a discriminator in
    the generator's step) is not inside one."""
    if not step.unstepped(variable):
        return False
    names, stepped = step.rec.names, set(step.stepped[loss])
    parts = names.tensors.get(id(variable), "").split(".")
    return any(names.members(".".join(parts[:end])) & stepped for end in range(1, len(parts)))


def _sibling_left_out(step: RecordedStep, variable: Any) -> bool:
    """Left out of the optimizer while the module that holds it directly is trained by it (a
    learned temperature or pooling weight next to an encoder the optimizer steps): meant to
    be trained, so the fix is the optimizer, not a cut."""
    if not step.unstepped(variable):
        return False
    name = step.rec.names.tensors.get(id(variable), "")
    owner = name.rpartition(".")[0]
    return bool(owner) and bool(step.rec.names.members(owner) & step.all_stepped)


def _loose(step: RecordedStep, graph: Graph, variable: Any) -> bool:
    """A plain leaf tensor that requires grad, stepped by no optimizer given, whose value the
    step combines only in its own arithmetic, never handing it into a module's forward (a
    PDE's coefficients next to the network that fits the solution): a learned tensor never
    registered, so the fix is the optimizer or registering it, not a cut. A tensor fed to a
    module (an input whose gradient the step takes) is no such tensor."""
    if isinstance(variable, nn.Parameter) or not variable.is_leaf \
            or not variable.requires_grad or id(variable) in step.all_stepped:
        return False
    leaf = graph.search.leaf_node.get(id(variable))
    if leaf is None:
        return False
    rec, nodes = step.rec, graph.search.nodes
    above = closure([leaf], lambda k: graph.callers.get(k, ()))
    return not any(k in rec.returned_by or (
        (entry := rec.made.get(k)) is not None and entry[0] is nodes[k] and entry[2] != "op")
        for k in above if k != leaf)


def _called_by_trained(step: RecordedStep, variable: Any) -> bool:
    """Left out of every optimizer while the module that holds it is called from the forward
    of a module the optimizers train (a layer the model reaches through a lambda or a plain
    attribute, not registered as its submodule: graphsage-simple's ``base_model``): part of the
    model, so the fix is the optimizer (or registering it), not a cut. A submodule the outer
    module holds (a GAN wrapper's generator) is no such layer. A target network is
    called by the step's own code, never from inside the trained model's forward."""
    if not step.unstepped(variable):
        return False
    names = step.rec.names
    name = names.tensors.get(id(variable), "")
    parts = name.split(".")
    for end in range(len(parts) - 1, 0, -1):
        label = ".".join(parts[:end])
        outer = step.rec.called_inside.get(label)
        module = names.by_label.get(label)
        if outer and module is not None:
            return any(names.members(o) & step.all_stepped
                       and all(m is not module for m in names.by_label[o].modules())
                       for o in outer if o in names.by_label)
    return False


def _add_to_optimizer(step: RecordedStep, loss: str, joining: list[Any], *,
                      called: bool = False, either: bool = False
                      ) -> tuple[str, tuple[Line, ...], FirstOf | None]:
    """The fix of learned tensors ``joining`` left out of the loss's optimizer, at the line
    that builds that optimizer when it is found, and where its edit goes (written when each
    tensor's name reads as that tensor there); ``either``: adding them and freezing them are
    both offered, and no edit picks one."""
    optimizer = step.optimizer_of[loss]
    pairing = step.optimizer(loss)
    line = step.built_at(pairing)
    where = (f"the optimizer built at {line.file}:{line.number} ({optimizer!r})"
             if line is not None else f"optimizer {optimizer!r} where it is built")
    namespace = step.namespace
    if called and line is not None:  # a module reached through a lambda: its closure's names
        holders = [m for root in step.rec.names.roots for m in root.modules()]
        namespace = {**closure_names(line, holders), **namespace}
    found = None if either else unregistered(pairing, line, step.namespace, step.function,
                                             joining)
    if found is not None:  # never registered on the model the optimizer is built from
        what, model = ", ".join(found.kept), found.model
        fix = (f"register {what} on {model} where it is made ({model}.parameters() never "
               f"holds it, and {where} steps {model}.parameters()): a learned tensor no "
               f"optimizer steps, which the loss trains (or requires_grad_(False) if it is "
               f"meant to stay fixed)")
        lines = (*found.lines, *(() if line is None else (line,)))
        return fix, lines, FirstOf((Option(
            (RegisteredAt(found.optimizer_line, pairing, found),), fix, lines),))
    joined = None if line is None or either else JoinedAt(line, pairing, namespace, {
        step.rec.names.name(v): v for v in joining})
    why = ("; its module runs inside the forward of a module the optimizer trains without "
           "being its submodule: register it there (self.<name> = module), or "
           "requires_grad_(False) if it is meant to stay fixed") if called else (
        "; or, if it is meant to stay fixed (a base layer under an adapter), "
        "requires_grad_(False) on it") if either else (
        " (or requires_grad_(False) if it is meant to stay fixed)")
    fix = (f"add it to {where}: a learned tensor left out of it, which the loss trains and "
           f"no optimizer steps{why}")
    lines = () if line is None else (line,)
    return fix, lines, None if joined is None else FirstOf((Option((joined,), fix, lines),))


def _fix(step: RecordedStep, loss: str, chain: list[Any], legit: set[int], targets: set[int],
         leaf: int, known: list[Cut]
         ) -> tuple[str, str | None, str, tuple[Line, ...], CutAt | None]:
    """``(kind, where to cut, the fix in words, the user's lines, the cut to write)`` of one
    leak: a cut proved on the recorded graph (:mod:`toolkit.audit.truth.cuts`; kind ``"cut"``,
    written all or none by :func:`~toolkit.audit.fixes.location.cut_edits`), or what could not
    be found and why (kind ``"no_target"``, ``"no_cut"``): see
    :class:`~toolkit.audit.findings.Leak`."""
    optimizer = step.optimizer_of[loss]
    if not targets:
        return "no_target", None, (f"loss {loss!r} reaches none of the tensors optimizer {optimizer!r} "
                      f"steps, so its whole gradient goes to tensors outside it; pairing it "
                      f"with their optimizer would train them on this objective: first make it "
                      f"reach what it trains (see the DEAD finding of {optimizer!r})"), (), None
    first = first_outside(chain, legit)
    if first == 0:
        return "no_cut", None, (f"loss {loss!r} reaches what optimizer {optimizer!r} steps only through "
                      f"its target side: no cut in the step's code spares them"), (), None
    cut = leak_cut(step, step.prover, loss, leaf, legit, known)
    if cut is None:
        return "no_cut", None, ("no cut in the step's code (where it makes a tensor, or hands one to a "
                      "module) removes this gradient without also cutting a tensor optimizer "
                      f"{optimizer!r} trains, or changing its gradient; "
                      "a cut inside a module's forward would change it for every caller"), (), None
    if cut not in known:
        known.append(cut)
    cut_at = cut.what[0]
    if len(cut.texts) == 1:
        fix = f"{cut.texts[0]} (behind it: {{owners}}): {cut.options}"
    else:
        steps = "; ".join(f"{i}) {text}" for i, text in enumerate(cut.texts, 1))
        fix = (f"{len(cut.texts)} cuts, all needed (behind them: {{owners}}): {steps}: "
               f"{cut.options}")
    if cut.block:  # a disabled toolkit block: the cut is already there
        fix = cut.texts[0]
    return "cut", cut_at, fix, cut.lines, CutAt((cut.sites,))


def _owned(leaks: list[Leak | Wanted[Leak]]) -> list[Leak | Wanted[Leak]]:
    """Fill each fix's ``{owners}``: the modules of the leaks that share its cut."""
    found = [leak.finding if isinstance(leak, Wanted) else leak for leak in leaks]
    behind: dict[str | None, list[str]] = {}
    for leak in found:
        behind.setdefault(leak.cut_at, []).append(leak.parameter)
    out: list[Leak | Wanted[Leak]] = []
    for item, leak in zip(leaks, found):
        if "{owners}" in leak.fix:
            fix = leak.fix.replace("{owners}", owners(behind[leak.cut_at]))
            leak = dataclasses.replace(leak, fix=fix)
            item = Wanted(leak, item.fix) if isinstance(item, Wanted) else leak
        out.append(item)
    return out


def check(step: RecordedStep) -> Found:
    """The rule: each loss's leaks, and what its gradient passes through (information, or
    leaks in the strict mode ``allow_pass_through=False``)."""
    leaks: list[Leak | Wanted[Leak]] = []
    passing: list[Leak] = []
    for name in step.graphs:
        found, through = find_leaks(step, name, step.removed[name])
        leaks += found
        (passing if step.allow_pass_through else leaks).extend(through)
    return {"leaks": leaks, "pass_through": passing}
