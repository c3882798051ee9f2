"""A comparison whose target side carries gradient to stepped tensors (``target``): the step
audit's rule on this backward's graph; and a copy the script moves toward a stepped network
(a momentum or EMA copy) that a loss trains through its own output.

Where a trained target is cut: on the path only the target takes, never where a cut would
also remove a path on which the loss trains those tensors as it should (the principle of the
step audit's proved cut, :func:`~toolkit.audit.truth.cuts.target_cut`, read here on the
graph alone):

- an output used only as the target is cut where it is made: the call of the user's code
  that returned it (``teacher(x).detach()``), at the first line that makes nothing else the
  loss trains through (not a line inside a network's ``forward`` that also makes the
  predictions of another call); a call whose values the script unpacks into names (``_, v =
  model(s2)``) where the name holding the target is read next (``r + g * v.detach()``);
- a target whose tensor also trains elsewhere (the same output read with gradient by another
  term, or by a later computation that keeps its graph: VQ-VAE's commitment loss, SimSiam's
  prediction from the same projection, TD targets from ``values[1:]`` of the predictions'
  forward) is cut where the loss reads it: the argument of the expression that compares it
  (``F.mse_loss(q, target.detach())``). That needs the line of the comparison: the finding
  waits for the next audited forward, run under
  :class:`~toolkit.audit.rules.running.zeroed.MadeAt`, which also says which reads of the target
  belong to the comparison's own expression (``F.kl_div`` reads its target twice); a run that
  ends first reports it cut where it was made."""

from __future__ import annotations

import ast
import dataclasses
import sys
from typing import Any

import torch
import torch.overrides

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import read_graph, sequence
from toolkit.audit.record.frames import Site, is_user
from toolkit.audit.record.sites import Line
from toolkit.audit.record.tensors import keyed
from toolkit.audit.result import plural
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.rules.running.kept_in_sync import toward
from toolkit.audit.rules.running.state import WatchState
from toolkit.audit.rules.running.zeroed import cut_operand
from toolkit.audit.rules.targets import target_edges
from toolkit.audit.truth.graph import Graph as StepGraph
from toolkit.audit.truth.labels import SELECTIONS
from toolkit.lens.backward_graph import node_label

__all__ = ["cut_call", "followers", "settle", "targets", "where_made"]


def targets(w: WatchState, graph: StepGraph, site: Site | None,
            stepped: dict[int, int], step: str = "") -> set[int] | None:
    """A comparison in the head of the loss whose target side reaches tensors an optimizer
    steps (the step audit's rule, :func:`~toolkit.audit.rules.targets.target_edges`,
    on this backward's graph): a teacher's soft targets, a guessed label made by the
    model, computed with gradients; the loss trains those tensors through its target.
    ``stepped``: each tensor an optimizer holds, with its index.

    The edit cuts the target on the path only the target takes (:func:`_own_calls`, else
    :func:`_read_cut`), as the step audit's proved cut does
    (:func:`~toolkit.audit.truth.cuts.target_cut`): never at a line whose cut would also
    cut a path on which the loss trains those tensors as it should.

    Returns the nodes the loss reaches without passing a target (``None``: it compares no
    target that reaches a stepped tensor)."""
    if not stepped:
        return None
    search = graph.search
    # in the order autograd made them (ids are addresses: their order is no run's own); a
    # product autograd made for a derivative the loss reads is that derivative's formula
    rec = w.staged.rec
    derived = rec.derivatives if rec is not None else {}
    edges = sorted(target_edges(graph, set(stepped), derived), key=lambda e: (
        sequence(search.nodes[e[0]]), sequence(search.nodes[e[1]]), e))
    key = w.backward_keys.get(w.events)
    waiting = w.target_lines.pop(key, None) if w.made_at is not None else None
    if not edges:
        _trained_through(w, graph, set(search.nodes), stepped)
        if waiting:   # another backward() of the same line (a loop over losses) may find them
            w.target_lines.setdefault(key, []).extend(waiting)
        return None
    # what the loss trains without passing any target: a cut may not touch it (with the lines
    # of this forward, every read of a target by the user's expression that compares it is
    # the target's: ``F.kl_div`` reads its target twice)
    removed = set(edges)
    if w.made_at is not None:
        removed |= _same_expression(w, graph, edges)
    # a target that other terms read by the same operation (MPO's E-step weights, weighing the
    # log-probability of each decoupled Gaussian: one read's form found, the other's scale a
    # constant): those reads are the target's too, so that it is cut where it is made
    removed |= {(r, t) for c, t in edges for r in graph.callers.get(t, ())
                if r != c and node_label(search.nodes[r]) == node_label(search.nodes[c])}
    untargeted = graph.reach(graph.roots, removed=removed)
    sites_of: dict[int, list[Site]] = {}     # each call output, by the calls that returned it
    for node, s, _ in w.call_outputs:
        if id(node) in search.nodes and s not in sites_of.setdefault(id(node), []):
            sites_of[id(node)].append(s)
    made_by: dict[Site, set[int]] = {}
    for k, sites in sites_of.items():
        for s in sites:
            made_by.setdefault(s, set()).add(k)
    # a call whose output an earlier backward of this iteration trained through (a prediction
    # there: inplace distillation's full network, whose loss ran first) is not the target's
    # own either: its cut would also remove that loss's path
    # nor is a line that made such an output at another call (a network's forward, run by
    # the critic's own loss before it makes the actor's target): its cut is at every call
    trained_at = {s for node, s, _ in w.call_outputs if id(node) in w.trained_outputs}
    own = {s for s, made in made_by.items()
           if not made & untargeted and not made & w.trained_outputs and s not in trained_at}
    toward = graph.reaching(stepped)
    _trained_through(w, graph, untargeted, stepped)
    names = w.names()
    found: dict[tuple, tuple[ScriptFinding, bool]] = {}
    # what earlier backwards of this iteration found at the same lines (one line that makes
    # the target of each loss a loop differentiates alone: PCGrad's tasks, each by its own
    # torch.autograd.grad): one finding with the tensors of every loss, whose one edit fixes all
    passes = {same: v for same, v in w.target_passes.items() if v[0] == w.iteration}
    w.target_passes = passes
    bound: dict[tuple, tuple[str, ...]] = {same: v[2] for same, v in passes.items()}
    trains: dict[tuple, dict[int, tuple]] = {same: dict(v[3]) for same, v in passes.items()}
    for compare, target in edges:
        met = graph.reach([target])
        leaves = {id(v): v for k in met
                  if isinstance(v := getattr(search.nodes[k], "variable", None), torch.Tensor)}
        reached = sorted(set(leaves) & set(stepped))
        if not reached:
            continue
        for k in reached:
            w.target_carried.setdefault(k, set()).add(w.events)
        placed = _own_calls(graph, target, untargeted, toward, sites_of, own)
        if placed is not None and len({(s.path, s.line) for s, _ in placed}) > 1:
            # calls on several lines (AWAC's two critics at the policy's actions and at the
            # data's): the target they make is cut once, where it is made; calls inside one
            # helper that the step's function (``step``) calls on one line (DrQ's
            # ``soft_target``) are cut at that call
            made = {where_made(w, search.nodes[n], s, step) for s, n in placed} if step \
                else set()
            placed = [(made.pop(), placed[0][1])] if len(made) == 1 else None
        lines = False    # whether the cut waits for the lines of the next forward
        named: tuple[str, ...] = ()    # the names a cut at a call unpacks (``a, b = f(x)``)
        anchored = None   # the name of a reference point bound to the weights themselves
        if placed is not None:
            sites, edits = [], []
            for s, node in placed:
                at, edit, cut = cut_call(w.fixes, s, search.nodes[node], met)
                named += cut
                sites.append(at)
                edits += [edit] if edit is not None else []
        else:
            anchor = _anchored(w, search.nodes[target], stepped, site)
            held_at = read = None
            if anchor is None:
                held_at = _held_cut(w, search.nodes[target], search.nodes[compare])
            if anchor is None and held_at is None:
                read = _made_cut(w, search.nodes[target], untargeted) or \
                    _read_cut(w, graph, search.nodes[compare], search.nodes[target])
            if anchor is not None:
                anchored, sites, edits = anchor[0], [anchor[1]], anchor[2]
            elif held_at is not None:
                sites, edits = held_at[0], [held_at[1]]
            elif read is not None:
                sites, edits = [read[0]], [read[1]]
            else:   # where it was made, as written before the lines are known
                lines = True
                sites = _outermost(w, graph, met)
                edits = [e for s in sites if (e := w.fixes.detach_call(s.path, s.span)) is not None]
        at = tuple(dict.fromkeys(s.shown() for s in sites)) + ((site.shown(),) if site else ())
        same = (at, lines)
        # one line that makes a target at each pass of a loop (SwAV's codes, one per crop;
        # each peer's prediction as the other's target, deep mutual learning), or two targets
        # on one line (``t1, t2 = F.normalize(z1), F.normalize(z2)``): one finding, with
        # every cut and every tensor trained through them (its cut, one edit of that line,
        # proves none of them alone), named by the targets the script still holds by a name
        held = trains.setdefault(same, {})
        held.update({id(p): (k, p) for i, o in enumerate(w.optimizers)
                     for k, p in keyed(i, o) if id(p) in set(reached)})
        if not w.optimizers:   # updated by hand: each tensor keyed by its name
            order = sorted((w.name_of(leaves[k]) or "", k) for k in reached)  # not by address
            held.update({k: (name or f"tensor {i}", leaves[k])
                         for i, (name, k) in enumerate(order)})
        keys = tuple(k for k, _ in held.values())
        tensors = [p for _, p in held.values()]
        before = found.get(same) or ((passes[same][1], False) if same in passes else None)
        known = before[0].edits if before else ()
        new_cut = not set(edits) <= set(known)
        edits = list(dict.fromkeys([*known, *edits]))
        called = bound.get(same, ())
        name = anchored or _bound_to(search.nodes[target])
        # read as an attribute where it is compared (a named tuple's field, V-trace's
        # ``vtrace_returns.vs``): named as the cut writes it
        dotted = next((e.old for e in edits if e.new == f"{e.old}.detach()" and "." in e.old
                       and all(part.isidentifier() for part in e.old.split("."))), None)
        if name is None and not called:
            name = dotted
        # a target written inline (``F.mse_loss(v, head.normalize(returns))``): the tensor
        # it is made from that the script names (``returns``)
        below = _bound_below(search.nodes[target]) if name is None and not called else None
        # the names the cut at a helper's call unpacks (``targets_x, targets_u = guess(x)``)
        made_of = tuple(n for n in dict.fromkeys(((below,) if below else ()) + named)
                        if n not in called and n != name)
        # and the value a cut of a call's output binds where the fix goes (a TD target made
        # from ``next_q = target_net(s2).max(1).values`` a line above the comparison); a cut
        # of a name already bound is named by it
        made_of += tuple(n for n in dict.fromkeys(
            n for e in edits if e.path and not e.old.isidentifier() and e.old != dotted
            for n in sorted(S.assigned_names(e.path, e.line)))
            if n not in called and n != name and n not in made_of)
        if name is not None and name not in called and (new_cut or not called):
            called = (*called, name)   # a target with a cut of its own is named too
        bound[same] = called
        shown = ", ".join(f"`{c}`" for c in called)
        found[same] = (ScriptFinding(
            "target", w.iteration,
            f"the target{'s' if len(called) > 1 else ''}{f' {shown}' if called else ''}"
            f"{f' (made from {made})' if (made := ', '.join(f'`{m}`' for m in made_of)) else ''}"
            f" of "
            f"{w.loss_label(site)} (backward at {site}) "
            f"{'carry' if len(called) > 1 else 'carries'} gradient to "
            f"{plural(len(tensors), 'tensor')} "
            f"{'an optimizer steps' if w.optimizers else 'the script updates itself'}: "
            f"the loss trains them "
            + (f"through its own target: `{anchored}` holds the weights themselves, not copies "
               f"of them, so each is compared with itself (zero at every step) and pulls "
               f"toward nothing" if anchored else
               "through its own target (a teacher's soft targets, a label the model guessed)"),
            keys, called + made_of + tuple(names.get(id(p), "?") for p in tensors),
            at, tuple(edits),
            advice=f"bind `{anchored}` to copies of the weights (`p.detach().clone()`) "
                   f"where the reference point is taken" if anchored else
                   "compute the target under torch.no_grad(), or .detach() it where it is "
                   "made", step=w.step_events, concerned=keys,
            extra={"loses": True, "carried_to": tuple(id(p) for p in tensors)}), lines)
        if not lines:
            earlier = passes.get(same)
            made, shown = w.added.get(id(earlier[1]), (None, None)) if earlier else (None, None)
            if earlier is not None and made is earlier[1] and \
                    w.findings.get(shown.key) is shown:
                # reported by an earlier backward: held here
                w.withdraw(shown.key, f"reported again by the backward of iteration "
                                      f"{w.iteration}, with the lines of its fix")
            passes[same] = (w.iteration, found[same][0], called, dict(held))
    _report(w, key, list(found.values()), waiting or [])
    return untargeted


def _anchored(w: WatchState, node: Any, stepped: dict[int, int], site: Site | None
              ) -> tuple[str, Site, list[Edit]] | None:
    """A stepped tensor that a comparison reads as its own target (``p - p0`` where ``p0`` is
    ``p``): a reference point of the weights bound to the weights themselves where a copy was
    meant (L2-SP's starting point, EWC's means, SI's previous task's weights). The name of the
    one list, tuple or dict of the user's frames that holds it and whose filling the fixes
    stage makes a copy cut from the graph (:func:`~toolkit.audit.fixes.copy_edits.copy_anchor`),
    the site of that assignment and its edit; ``None`` otherwise."""
    tensor = getattr(node, "variable", None)
    if not isinstance(tensor, torch.Tensor) or id(tensor) not in stepped or site is None:
        return None
    found = []
    for name, value in list(w.scope.items()):
        items = value.values() if isinstance(value, dict) else \
            value if isinstance(value, list | tuple) else ()
        if not name.startswith("_") and any(item is tensor for item in items):
            fix = w.fixes.copy_anchor(site.path, name)
            if fix is not None:
                found.append((name, fix))
    if len(found) != 1:
        return None
    name, (line, edits) = found[0]
    return name, Site(site.path, line, None), edits


def _made_lines(w: WatchState, node: Any) -> tuple[Line, ...]:
    """The user's lines, innermost first, where the recording saw ``node`` made (none where
    it did not)."""
    rec = w.staged.rec
    made = rec.made.get(id(node)) if rec is not None else None
    return made[1] if made is not None and made[0] is node else ()


def where_made(w: WatchState, node: Any, site: Site, step: str) -> Site:
    """The line of the step's own code (the function ``step`` that called ``backward()``)
    that made the output of the call at ``site`` (the call of a helper that returns it), or
    ``site``."""
    line = next((x for x in _made_lines(w, node) if x.function == step), None)
    if line is None or not line.path or line.span is None:
        return site
    return Site(line.path, line.number, line.span)


def _trained_through(w: WatchState, graph: StepGraph, reached: set[int],
                     stepped: dict[int, int]) -> None:
    """Note the calls' outputs this backward trains stepped tensors through, of the nodes
    ``reached`` without passing a target: a later backward of the iteration may not cut them
    (:attr:`~toolkit.audit.rules.running.state.WatchState.trained_outputs`)."""
    toward = graph.reaching(stepped)
    w.trained_outputs.update(id(node) for node, _, _ in w.call_outputs
                             if id(node) in reached and id(node) in toward)


def _bound_to(node: object) -> str | None:
    """The name a frame of the user's code running now (the one that called ``backward()``, or
    one that called it) binds to the tensor ``node`` made: the target as the script calls it
    (Deep SVDD's center ``c``), or ``None``."""
    frame = sys._getframe(1)
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            for name, value in list(frame.f_locals.items()):
                if isinstance(value, torch.Tensor) and value.grad_fn is node and \
                        not name.startswith("_"):
                    return name
        frame = frame.f_back
    return None


def _bound_below(node: object, within: int = 6) -> str | None:
    """The name the user's frames bind to the nearest tensor the target ``node`` is made from
    (inputs first, within ``within`` nodes below it): what an inline target reads."""
    level, seen = [node], {id(node)}
    for _ in range(within):
        level = [n for m in level for n, _ in getattr(m, "next_functions", ())
                 if n is not None and id(n) not in seen and not seen.add(id(n))
                 and not hasattr(n, "variable")]
        for n in level:
            name = _bound_to(n)
            if name is not None:
                return name
    return None


def _report(w: WatchState, key: tuple | None, found: list[tuple[ScriptFinding, bool]],
            waiting: list[ScriptFinding]) -> None:
    """Add this backward's findings; one whose cut waits for the lines of the next audited
    forward (:class:`~toolkit.audit.rules.running.zeroed.MadeAt`) is kept until that backward, or
    the end (:func:`settle`), and those kept before are replaced by what it finds now."""
    first = {f.tensors: f for f in waiting}
    for finding, lines in found:
        before = first.pop(finding.tensors, None)
        if before is not None and not lines:   # placed now: first seen then, cut where found
            finding = dataclasses.replace(finding, iteration=before.iteration,
                                          step=before.step)
        elif before is not None:
            finding = before
        if lines and before is None and key is not None and w.made_at is None and \
                not w.done() and w.audited(w.iteration + 1):
            w.target_lines.setdefault(key, []).append(finding)
        else:
            w.add(finding)
    for finding in first.values():
        w.add(finding)


def settle(w: WatchState) -> None:
    """The script ended before a kept finding's lines came: it is reported as first found.
    Then a target whose every gradient, at every backward that carried one through it, was
    cleared before any step used it (a discriminator's features read as the target of the
    encoder's and the decoder's losses, its gradients cleared before its own backward, as
    VAE-GAN's step does), or was zero, changed no weight: it is no failure, and the gradient
    it wasted is the ``wasted`` note's."""
    for waiting in w.target_lines.values():
        for finding in waiting:
            w.add(finding)
    w.target_lines.clear()
    for key, finding in list(w.findings.items()):
        carried = [(event, k) for k in finding.extra.get("carried_to", ())
                   for event in w.target_carried.get(k, ())]
        written = [c for c in carried if c in w.ledger.written_ever]
        if written and all(c in w.ledger.wasted_ever for c in written):
            w.withdraw(key, "every gradient carried into a stepped tensor was cleared "
                            "before a step used it, so no weight changed")


def _own_calls(graph: StepGraph, target: int, untargeted: set[int], toward: set[int],
               sites_of: dict[int, list[Site]], own: set[Site]
               ) -> list[tuple[Site, int]] | None:
    """The calls of the user's code on the target's own path that make it: from the target
    inwards toward the stepped tensors (``toward``: the nodes that reach them), through nodes
    the loss reaches only through its targets, each network call whose output it is, at the
    first (innermost) line that returned it and makes nothing the loss trains otherwise.
    ``None`` when the path meets such a tensor (an output that also trains through another
    term) or a stepped tensor before any such call."""
    out: list[tuple[Site, int]] = []
    seen, todo = {target}, [target]
    while todo:
        k = todo.pop()
        mine = next((s for s in sites_of.get(k, ()) if s in own), None)
        if mine is not None:
            out.append((mine, k))
            continue
        if k in untargeted or hasattr(graph.search.nodes[k], "variable"):
            return None   # shared, or a stepped tensor the target's operations read directly
        for c in graph.children.get(k, ()):
            if c in toward and c not in seen:
                seen.add(c)
                todo.append(c)
    return list(dict.fromkeys(out)) or None


def _expression(w: WatchState, graph: StepGraph, key: int) -> Site | None:
    """The line and span of the user's expression that made node ``key``: its own, or, for a
    node torch made inside one call (the parts of ``F.cosine_similarity``), that call's."""
    assert w.made_at is not None
    nodes = graph.search.nodes
    todo, seen = [key], {key}
    while todo:
        k = todo.pop(0)
        s = w.made_at.site(nodes[k])
        if s is not None:
            return s
        for c in graph.callers.get(k, ()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return None


def _same_expression(w: WatchState, graph: StepGraph, edges: list[tuple[int, int]]
                     ) -> set[tuple[int, int]]:
    """The other reads of each target by the expression that compares it."""
    out = set()
    for compare, target in edges:
        at = _expression(w, graph, compare)
        if at is None:
            continue
        out |= {(r, target) for r in graph.callers.get(target, ())
                if r != compare and _expression(w, graph, r) == at}
    return out


def _held_cut(w: WatchState, target: object, compare: object
              ) -> tuple[list[Site], Edit] | None:
    """The target cut where the script made it, when it made it before this iteration's
    forward and holds it since (MAS's anchor, ``old_params = {n: p.clone() ...}`` once
    after the first task, read by every step of the second): every loss reads it from that
    one line, where the recording saw it made. The sites: that line, and the line of this
    loss that compares with it."""
    start = w.start_seq.get(w.iteration)
    made = _made_lines(w, target)
    if start is None or not made or not 0 <= sequence(target) < start:
        return None
    line = made[0]
    edit = w.fixes.detach_call(line.path, line.span) if line.path and line.span else None
    if edit is None:
        return None
    reads = [Site(r.path, r.number, r.span) for r in _made_lines(w, compare)[:1]]
    return [Site(line.path, edit.line, line.span), *reads], edit


def _made_cut(w: WatchState, target: object, untargeted: set[int]) -> tuple[Site, Edit] | None:
    """The target cut where the user's expression that computed it made it
    (``F.softmax(full_logits, dim=1)`` -> ``F.softmax(full_logits, dim=1).detach()``), when
    the loss reads that value only as its target (no path it trains through passes it) and no
    backward before it in the iteration trained through it: found with the lines of this
    forward, when the watch kept them. A value a network's call returned is
    :func:`_own_calls`'."""
    if w.made_at is None or id(target) in untargeted or id(target) in w.trained_outputs:
        return None
    s = w.made_at.site(target)
    # a part of a value another line made (``targets[mask]``): the target is what that line
    # computes, cut where it is made (as the step audit's proved cut is,
    # :func:`~toolkit.audit.truth.cuts.target_cut`)
    walked = False
    while s is not None and node_label(target) in SELECTIONS:
        below = next((n for n, _ in target.next_functions if n is not None), None)
        made = None if below is None else w.made_at.site(below)
        if made is None or (made.path, made.line) == (s.path, s.line) or \
                id(below) in untargeted or id(below) in w.trained_outputs:
            break
        target, s, walked = below, made, True
    carried = _carried_from(w, target, s, untargeted) if s is not None else None
    if carried is not None:
        target, s, walked = *carried, True
    # a call is cut where it is made; a value selected from (any expression) where that line
    # makes it; a value the loss reads whole by its name, where the loss reads it
    cut = w.fixes.detach_expression if walked else w.fixes.detach_call
    edit = cut(s.path, s.span) if s is not None and s.span is not None else None
    if s is None or edit is None:
        return None
    return Site(s.path, edit.line, s.span), edit


def _carried_from(w: WatchState, target: Any, s: Site, untargeted: set[int]
                  ) -> tuple[Any, Site] | None:
    """The value a target made of one value with a graph and constants carries, with the site
    that made it (``returns = kl_penalty + advantages.unsqueeze(1)``, the penalty cut:
    ``advantages``, where the line before makes it), when another line made it and the loss
    reads it only through the target: the gradient the target carries is that value's, cut
    where it is made. Followed line by line while each value is made of one other (MixMatch's
    guess, sharpened on one line, put beside the labels on the next and mixed with a
    permutation of itself on a third: the guess), to the first made of several or by a call."""
    found, node = None, target
    while (below := _made_of_one(w, node, s, untargeted)) is not None:
        found = node, s = below
    return found


#: nodes of one line walked for the one value it is made of, before the walk gives up
_MAX_LINE = 256


def _made_of_one(w: WatchState, node: Any, s: Site, untargeted: set[int]
                 ) -> tuple[Any, Site] | None:
    """The one value, with a graph, that another line made, binding it to a name whole, and
    the line ``s`` makes ``node`` of, besides constants; ``None`` when that line reads
    several, a leaf, a value the loss also trains through, or one no user line made."""
    made_at = w.made_at
    if made_at is None:
        return None
    values: dict[int, tuple[Any, Site]] = {}
    todo, seen = [node], {id(node)}
    while todo:
        if len(seen) > _MAX_LINE:
            return None
        for child in (n for n, _ in todo.pop().next_functions if n is not None):
            if id(child) in seen:
                continue
            seen.add(id(child))
            if id(child) in untargeted or id(child) in w.trained_outputs:
                return None
            made = made_at.site(child)
            if made is None:
                return None   # a leaf, or a value made where no line of the user's is known
            if (made.path, made.line) == (s.path, s.line):
                todo.append(child)
            else:
                values[id(child)] = child, made
    if len(values) != 1:
        return None
    value, made = next(iter(values.values()))
    # a value the script binds to a name of its own, whole: not part of one
    # (``torch.stack(v).min(0)`` of ``.values``), where no edit of the expression cuts it
    return (value, made) if S.bound_whole(made.path, made.span) is not None else None


def _read_cut(w: WatchState, graph: StepGraph, compare: object, target: object
              ) -> tuple[Site, Edit] | None:
    """The target cut where the loss reads it, on the line of the user's expression that
    holds the comparison (``F.mse_loss(q, target)`` -> ``target.detach()``; a comparison
    torch computes inside one call, ``F.cosine_similarity(p, z)``, read by that call):
    found with the lines of this forward, when the watch kept them."""
    if w.made_at is None:
        return None
    nodes = graph.search.nodes
    todo, seen = [id(compare)], {id(compare)}
    while todo:
        k = todo.pop(0)
        node = nodes[k]
        s = w.made_at.site(node)
        if s is not None:
            read = w.made_at.operands(node)
            position = next((i for i, n in enumerate(read) if n is target), None)
            if position is None:   # made inside the call from its argument (a broadcast)
                below = graph.reach([id(target)])
                holding = [i for i, n in enumerate(read) if n is not None and id(n) in below]
                position = holding[0] if len(holding) == 1 else None
            edit = cut_operand(w.fixes, s.path, s.span, position) if position is not None else None
            return (Site(s.path, edit.line, s.span), edit) if edit is not None else None
        for c in graph.callers.get(k, ()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return None


def _outermost(w: WatchState, graph: StepGraph, met: set[int]) -> list[Site]:
    """The calls whose outputs the target side holds, the outermost (an inner network's call
    ends first: an outer call handing the same output on is not where it was made)."""
    made: dict[int, Site] = {}
    for node, s, _ in w.call_outputs:
        if id(node) in met:
            made.setdefault(id(node), s)
    inner = {k for key in made for k in graph.reach([key]) - {key}}
    return list(dict.fromkeys(s for key, s in made.items() if key not in inner))


def cut_call(fixes: FixWriter, s: Site, node: object, within: set[int] | None = None
             ) -> tuple[Site, Edit | None, tuple[str, ...]]:
    """The call at ``s`` cut where it is made: ``teacher(x).detach()``; a call whose values the
    script unpacks into names (``_, v = model(s2)``) where the name holding ``node`` is read
    once next, in the statements after it (``r + g * v.detach()``): the site of that edit, the
    edit, and the names it cuts. Where that name is read more than once, or several names hold
    the graph (DivideMix's ``targets_x, targets_u = co_guess(...)``), the whole call is cut
    when every name holding a graph holds one of the nodes ``within`` (by ``id``: the part of
    the graph the cut is for), the statement put under ``with torch.no_grad():``, and
    ``None`` is the edit otherwise."""
    found = S.call_at(s.path, s.span)
    bound = _unpacked(s, found[0]) if found is not None else None
    if bound is None:
        return s, fixes.detach_call(s.path, s.span), ()
    held = _held(bound)
    name = next((n for n, v in held.items() if v.grad_fn is node), None)
    read = _next_read(s.path, bound, name) if name is not None else None
    if read is not None and name is not None:
        edit = fixes.node_edit(s.path, read, f"{name}.detach()")
        span = (read.lineno, read.end_lineno or read.lineno, read.col_offset,
                read.end_col_offset or 0)
        return Site(s.path, read.lineno, span), edit, (name,)
    carried = tuple(n for n, v in held.items() if v.grad_fn is not None)
    if within is None or not carried or any(id(held[n].grad_fn) not in within
                                            for n in carried):
        return s, None, ()
    return s, fixes.call_under_no_grad(s.path, s.span), carried


def _unpacked(s: Site, call: ast.Call) -> ast.Assign | None:
    """The assignment whose value is ``call`` and unpacks it into names (``a, b = f(x)``)."""
    st = S.assignment_of(s.path, call)
    return st if st is not None and isinstance(st.targets[0], ast.Tuple | ast.List) else None


def _held(bound: ast.Assign) -> dict[str, torch.Tensor]:
    """The tensors ``bound``'s target names hold, by name, in the innermost frame of the
    user's code running now (the one that called ``backward()``, or one that called it) that
    binds any of them."""
    names = [e.id for e in bound.targets[0].elts  # type: ignore[attr-defined]
             if isinstance(e, ast.Name)]
    frame = sys._getframe(1)
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            held = {n: v for n in names
                    if isinstance(v := frame.f_locals.get(n), torch.Tensor)}
            if held:
                return held
        frame = frame.f_back
    return {}


def _next_read(path: str, bound: ast.Assign, name: str) -> ast.Name | None:
    """The one place ``name`` is read in the statements after ``bound`` in its block (up to
    the one that binds it again); ``None`` when it is read in none or in several."""
    parsed = S.syntax_tree(path)
    if parsed is None:
        return None
    for block in S.blocks(parsed[0]):
        if bound not in block:
            continue
        reads: list[ast.Name] = []
        for st in block[block.index(bound) + 1:]:
            names = [n for n in ast.walk(st) if isinstance(n, ast.Name) and n.id == name]
            reads += [n for n in names if isinstance(n.ctx, ast.Load)]
            if any(isinstance(n.ctx, ast.Store) for n in names):
                break
        return reads[0] if len(reads) == 1 else None
    return None


def followers(w: WatchState, index: int, stepped) -> None:
    """Tensors the script moved itself since their last step, along the line to another
    tensor an optimizer holds (``k <- m k + (1 - m) q``, a momentum or EMA copy, or a copy
    outright), that a loss's gradient reached: the copy the prediction is compared with
    (MoCo's key encoder) is trained by the loss through its own side of the comparison. The
    tensor followed trains: it was stepped since the mover's last step (Tent's reset to the
    state copied from the source model, which trained in an earlier phase, follows nothing).
    The edit cuts the output of the call that made the copy's values (the outermost call
    reaching them and no other stepped tensor)."""
    held = [p for o in w.optimizers for g in o.param_groups for p in g["params"]]
    # each stepped tensor the script wrote since its last step (a snapshot older than that
    # step, taken before steps that were not audited, holds the optimizer's moves as well)
    snapshots = {id(p): w.after_step.pop(id(p), (None, None)) for _, p in stepped}
    written = {id(p) for _, p in stepped
               if (old := snapshots[id(p)][1]) is not None
               and snapshots[id(p)][0] == w.stepped_at.get(id(p)) and old.shape == p.shape
               and not torch.equal(p.detach(), old)}   # as exact as in double, no copies
    moved: dict[int, tuple[str, torch.Tensor]] = {}
    for key, p in stepped:
        if id(p) not in written or not w.ledger.live.get(id(p)):
            continue
        old = snapshots[id(p)][1]
        now = p.detach().flatten().double()
        before = old.flatten().double()
        since = w.stepped_at.get(id(p), -1)
        for q in held:
            # on the line to q (a clamp, a projection or a decay moves toward no other
            # tensor), one that trains: stepped since p's last step (not a network that
            # trained in an earlier phase, whose values a reset to a snapshot restores), and
            # not written by the script since (two layers of one width put back whole to
            # their initial values land on each other's: AlphaZero's rejected generation)
            if q is not p and q.shape == p.shape and w.stepped_at.get(id(q), -1) >= since \
                    and id(q) not in written and toward(
                    before, now, q.detach().flatten().double(), eps=torch.finfo(p.dtype).eps):
                moved[id(p)] = (key, p)
                break
    stepped_ids = {id(p) for p in held}
    # by a loss that trains another stepped tensor too (the prediction it compares with the
    # copy's output); a loss of the copy's own, whose gradient its optimizer now steps, is
    # the copy's training after a sync (AWP's proxy, loaded from the model, then stepped on
    # its own loss for the weight perturbation, Wu et al. 2020)
    moved = {k: v for k, v in moved.items() if any(
        (src.wrote - moved.keys()) & stepped_ids for src in w.ledger.live.get(k, ()))}
    if not moved:
        return
    reach: dict[int, set[int]] = {}
    sites: dict[int, Site] = {}
    for node, s, _ in w.call_outputs:
        leaves = set(read_graph([node]).leaves) & stepped_ids
        if leaves & set(moved) and leaves <= set(moved):
            reach[id(node)] = leaves
            sites[id(node)] = s
    # the outermost: a call whose output reaches more of them
    best = sorted(reach, key=lambda k: -len(reach[k]))
    chosen: list[Site] = []
    covered: set[int] = set()
    for k in best:
        if not reach[k] <= covered:
            chosen.append(sites[k])
            covered |= reach[k]
    edits = tuple(e for s in dict.fromkeys(chosen)
                  if (e := w.fixes.detach_call(s.path, s.span)) is not None)
    names = w.names()
    keys = tuple(k for k, _ in moved.values())
    tensors = [p for _, p in moved.values()]
    srcs = {s for p in tensors for s in w.ledger.live.get(id(p), []) if s.site}
    at = tuple(s.shown() for s in dict.fromkeys(chosen)) + tuple(
        sorted({s.site.shown() for s in srcs}))
    w.add(ScriptFinding(
        "target", w.iteration,
        f"{plural(len(tensors), 'tensor')} the script moves itself toward other tensors an "
        f"optimizer steps (a momentum or EMA copy) get gradient from the loss: the loss "
        f"trains the copy it compares with through the copy's own output",
        keys, tuple(names.get(id(p), "?") for p in tensors), at, edits,
        advice="compute the copy's output under torch.no_grad(), or .detach() it where it "
               "is made", step=w.step_events - 1, concerned=keys,
        extra={"loses": True}))
