"""A recurrent state cut at a step of the unroll one loss reads whole (``truncated``).

An RNN cell stepped over a sequence, a world model's transition, an agent's recurrent network
over an episode: each call of the network reads the next input and the state its previous call
returned, and the loss reads the outputs of every step. A ``.detach()`` on that state inside the
unroll (``cell(x[t], h.detach())``, ``h = h.detach()`` at the top of each step) truncates
backpropagation through time to one step: the loss at step ``t`` trains the network through
step ``t`` alone, never back through the states that led there, so no step learns what it
should keep for the next. PlaNet's RSSM (Hafner et al. 2019; Kaixhin/PlaNet ``models.py``
``TransitionModel.forward``) and pymarl's recurrent agents (``QLearner.train`` unrolls
``mac.forward`` over the episode) carry the state's graph through the whole chunk; truncated
BPTT cuts it where one chunk's ``backward()`` ends, between iterations, which this rule never
sees as one loss.

It is told apart from the cuts that belong inside a loss by what the two calls read:

- the call that reads the cut state reads, in another argument, a tensor the earlier call did
  not (the next input): the same input again is a refinement, whose recycled estimate is cut as
  the method means (:mod:`~toolkit.audit.rules.running.recycling`), where the loss compares
  that estimate itself (RAFT's flow); a state the loss reads only through other networks (the
  heads of PonderNet's pondering steps, Banino et al. 2021, which read the same input at every
  step) is no estimate;
- the loss reads the earlier call's output through another path (the step's own prediction):
  a pushforward unroll whose earlier steps the loss reads only through the state has nothing to
  truncate;
- the argument is the cut value itself, as the ``.detach()`` returned it, and the value cut is
  what the earlier call returned, or a value plain operations made of it (a sample drawn from
  it), not what another network made of it: a prediction fed back as the next input, cut
  (a closed-loop forecaster, scheduled sampling), is an input the method chose to cut.

A recurrence written in plain operations inside one network's forward (an IndRNN layer's
``h = relu(x_t + weight_hh * h.detach())`` over the time steps, as Sunnydreamrain/IndRNN_pytorch
steps it) calls no network per step. There the steps are the runs of one cut's line: the state
cut at one run is what the operations made after the previous run read (the operation that
trains a recurrent weight saves the state it multiplies, so the graph shows it), the loss reads
the states of both runs, and no two steps in a row read the same input (a refinement reads the
same one at every step, as RAFT's update reads the same context).

The network may be frozen for this loss: a policy trained through a learned model (SVG(inf),
Heess et al. 2015; Dreamer's imagination, Hafner et al. 2020, whose ``img_step`` runs with the
world model's weights switched off for the actor's loss) carries the policy's gradient through
the model's states, and a cut of the state before each transition leaves each imagined state
one action deep. There the tensors concerned are those an optimizer steps behind the state the
earlier call returned (the policy's), and without any there is nothing to truncate (a frozen
encoder run over data).

The failure names the cut's line; its edit removes the ``.detach()`` (a statement
``h = h.detach()`` goes whole)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from itertools import pairwise

import torch

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import places, sequence
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import keyed
from toolkit.audit.rules.running.recycling import Pass, identity
from toolkit.audit.rules.running.state import WatchState
from toolkit.audit.rules.saved import saved_values
from toolkit.lens.graph_walk import walk

__all__ = ["truncated"]


def truncated(w: WatchState, nodes: set[int], site: Site | None,
              roots: Sequence[torch.Tensor] = ()) -> None:
    """At an audited ``backward()`` of ``roots`` whose graph holds the nodes ``nodes`` (by
    ``id``): each cut made in this loss's forward whose result a call of a network reads in
    place of the state its earlier call returned, both calls' outputs read by the loss, the
    later call reading a new input beside it, or the same input where the loss reads the
    earlier call's output only through other networks' calls (see the module's
    docstring)."""
    passes = w.recycling.passes
    since = w.events - 1   # this backward's own forward: after the previous event
    cuts = {identity(out): (node, cut) for node, cut, out, event in w.detaches
            if event == since and not out.requires_grad}
    if not cuts:
        return
    made_by: dict[int, list[Pass]] = {}
    for p in passes:
        for n in p.outs:
            made_by.setdefault(id(n), []).append(p)
    found: dict[Site, list[tuple[Pass, Pass]]] = {}
    direct: set[int] | None = None
    behind: dict[int, set[int]] = {}   # what optimizers step behind a frozen call's outputs

    def compared(p: Pass) -> bool:
        """Whether the loss reads ``p``'s output otherwise than through another network's
        call: an estimate the loss compares (RAFT's flow), not a state only heads read."""
        nonlocal direct
        if direct is None:
            calls = {id(n) for n, _, event in w.call_outputs if event == since}
            direct = {id(n) for _, n, _, _ in walk([t for t in roots if t.grad_fn is not None],
                                                   expand=lambda n: id(n) not in calls)}
        return any(id(n) in direct for n in p.outs)

    for later in passes:
        if len(later.slots) < 2 or not any(id(n) in nodes for n in later.outs):
            continue
        for k, slot in enumerate(later.slots):
            if slot is not None:
                continue
            for held in later.held[k]:
                node, cut = cuts.get(held, (None, None))
                if node is None or cut is None or any(
                        b is later for _, b in found.get(cut, ())):
                    continue
                made = [p for p in _producers(node, made_by) if p.module is later.module
                        and p.order < later.order and any(id(n) in nodes for n in p.outs)
                        and (not later.same_input(p, k) or not compared(p))
                        and (later.trains or _stepped_behind(w, p, behind))]
                if made:
                    found.setdefault(cut, []).append((max(made, key=lambda p: p.order), later))
    # the cuts of one line are one finding (``cell(x, (h.detach(), c.detach()))``): its edit
    # takes them all away
    by_line: dict[tuple[str, int], dict[Site, list[tuple[Pass, Pass]]]] = {}
    for cut, links in found.items():
        by_line.setdefault((cut.path, cut.line), {})[cut] = links
        w.meant.pop(cut, None)   # a finding, not a cut taken as meant
    for cuts_here in by_line.values():
        w.add(_finding(w, cuts_here, site, behind))
    for cut, params in _by_hand(w, nodes, since, set(found)).items():
        w.meant.pop(cut, None)
        w.add(_by_hand_finding(w, cut, params, site))


def _by_hand(w: WatchState, nodes: set[int], since: int, done: set[Site]
             ) -> dict[Site, set[int]]:
    """The cuts of one line run at each step of a recurrence of plain operations, both steps'
    states read by the loss (see the module's docstring), with the ids of the tensors the
    steps' own operations train; not those in ``done``."""
    runs: dict[Site, list[tuple[object, torch.Tensor]]] = {}
    for node, cut, out, event in w.detaches:
        if event == since and not out.requires_grad and cut not in done:
            runs.setdefault(cut, []).append((node, out))
    # what a network returned: a value a network made of the state is no state made by
    # plain operations (a closed-loop forecaster's prediction, fed back cut)
    calls = {id(node) for node, _, event in w.call_outputs if event == since}
    found: dict[Site, set[int]] = {}
    for cut, made in runs.items():
        states = {id(node) for node, _ in made}
        steps = [_step(node, before, out, states, calls)
                 if id(before) in nodes and id(node) in nodes else None
                 for (before, out), (node, _) in pairwise(made)]
        pairs = [(a, b) for a, b in pairwise(steps) if a is not None and b is not None]
        # each step a new input, never the one the step before read
        if pairs and all(a[0] and b[0] and not a[0] & b[0] for a, b in pairs):
            found[cut] = {k for step in steps if step is not None for k in step[1]}
    return found


def _step(node: object, before: object, out: torch.Tensor, states: set[int],
          calls: set[int]) -> tuple[set[tuple], set[int]] | None:
    """The operations autograd made after ``before`` (the state one run of the cut took)
    that the state at ``node`` is computed by, up to the outputs of network calls (``calls``,
    by ``id``: inputs of the step): ``None`` where none of them read ``out`` (that run's cut
    value), where ``node`` is a network's output, or where they reach one of the ``states``
    the line cut (by ``id``) uncut, so that they are more than one step (the next layer
    reading every state of the one below), else the inputs they read from outside (an edge
    into an earlier node, with the operation's own arguments, which tell ``x[t]`` from
    ``x[t - 1]``; a constant they saved, such as a time step of the data) and the ids of the
    tensors they train."""
    if id(node) in calls:
        return None
    start, cut = sequence(before), identity(out)
    reads = False
    inputs: set[tuple] = set()
    trained: set[int] = set()
    seen = {id(node)}
    todo = [node]
    while todo:
        n = todo.pop()
        arguments: tuple | None = None
        for value in saved_values(n):
            if isinstance(value, torch.Tensor) and value.grad_fn is None and \
                    not value.requires_grad:
                key = identity(value)
                if key == cut:
                    reads = True
                else:
                    inputs.add(key)
        for child, nr in getattr(n, "next_functions", ()):
            if child is None:
                continue
            variable = getattr(child, "variable", None)
            if id(child) in states:
                return None
            if variable is not None:
                trained.add(id(variable))
            elif sequence(child) > start and id(child) not in calls:
                if id(child) not in seen:
                    seen.add(id(child))
                    todo.append(child)
            else:
                if arguments is None:
                    arguments = tuple(repr(v) for v in saved_values(n)
                                      if not isinstance(v, torch.Tensor))
                inputs.add(("edge", id(child), nr, arguments))
    return (inputs, trained) if reads else None


def _by_hand_finding(w: WatchState, cut: Site, params: set[int],
                     site: Site | None) -> ScriptFinding:
    names = w.names()
    held = _held(w, params)
    state, edits = _uncut(w, cut)
    what = f"`{state}`" if state else "the state"
    trained = ", ".join(f"`{names.get(id(p), '?')}`" for _, p in held) or "the network"
    return _truncated(
        w, f"{what}, cut by `.detach()` at {cut}, is what the next run of that line reads, at "
        f"the next step of the loop that made it, beside a new input, and "
        f"{w.loss_label(site)} (backward at {site}) reads the states of both steps",
        f"so {trained} never learn through the states that led to each step",
        cut, [state] if state else [], held, edits, (cut,), site)


def _held(w: WatchState, ids: set[int]) -> list[tuple[str, torch.Tensor]]:
    """The tensors whose ids are ``ids`` that optimizers hold, with their keys."""
    return [(key, p) for i, o in enumerate(w.optimizers) for key, p in keyed(i, o)
            if id(p) in ids]


def _truncated(w: WatchState, found: str, so: str, cut: Site, states: list[str],
               held: list[tuple[str, torch.Tensor]], edits: list, at: tuple[Site, ...],
               site: Site | None) -> ScriptFinding:
    """The failure: what was ``found``, the cut's effect (``so``: on what), the tensors
    concerned and the edit that takes the cut at ``cut`` away."""
    names = w.names()
    return ScriptFinding(
        "truncated", w.iteration,
        f"{found}: the cut truncates backpropagation through time to one step inside the "
        f"unroll the loss reads whole, {so}. Truncated BPTT cuts the state between chunks, "
        f"where one chunk's backward() ends",
        tuple(key for key, _ in held),
        tuple(dict.fromkeys([*states, *(names.get(id(p), "?") for _, p in held)])),
        tuple(dict.fromkeys(s.shown() for s in (*at, *((site,) if site else ())))),
        tuple(edits),
        advice=f"remove the `.detach()` at {cut}: the state keeps its graph through the "
               f"unroll the loss reads",
        # the cut's input reaches more than the network that reads it (the networks that made
        # the state, the input's encoder): any gradient may change
        step=w.step_events, concerned=("*",))


def _stepped_behind(w: WatchState, p: Pass, cache: dict[int, set[int]]) -> set[int]:
    """The ids of the tensors optimizers step that the outputs of call ``p`` were computed by
    (kept in ``cache`` for the finding that names them): for a network frozen for this loss (a
    world model a policy is trained through), what the cut keeps from the loss is behind the
    state it carried (the policy's actions)."""
    if id(p) not in cache:
        stepped = w.stepped_map()
        cache[id(p)] = {id(v) for _, n, _, _ in walk(places(p.outs))
                        if (v := getattr(n, "variable", None)) is not None and id(v) in stepped}
    return cache[id(p)]


def _producers(node: object, made_by: dict[int, list[Pass]]) -> list[Pass]:
    """The calls whose outputs the value at ``node`` is computed from by plain operations,
    the nearest on each path (a walk that stops at every call's output): the state an RNN cell
    returned, or a sample drawn from a network's output, but not what a head made of the state
    (a prediction fed back as the next input is the head's)."""
    return [p for _, n, _, first in walk(places([node]), expand=lambda n: id(n) not in made_by)
            if first and id(n) in made_by for p in made_by[id(n)]]


def _finding(w: WatchState, cuts: dict[Site, list[tuple[Pass, Pass]]],
             site: Site | None, behind: dict[int, set[int]]) -> ScriptFinding:
    # in the order the line writes them (found by a set of tensors: any order)
    order = sorted(cuts, key=lambda c: c.span or (c.line, 0, c.line, 0))
    cut = order[0]
    links = [link for one in order for link in cuts[one]]
    module = links[0][1].module
    called = next((name for m, name in w.called_networks() if m is module), "a network")
    # a network that trains loses its own gradient through time; one frozen for this loss,
    # that of what made the states it carries
    held = _held(w, {id(p) for p in module.parameters()} if links[0][1].trains else
                 set().union(*(_stepped_behind(w, a, behind) for a, _ in links)))
    states: list[str] = []
    edits: list = []
    for one in order:
        state, taken = _uncut(w, one)
        states += [state] if state else []
        edits += taken
    what = ", ".join(f"`{x}`" for x in dict.fromkeys(states)) or "the state"
    reads = sorted({b.site for _, b in links}, key=lambda s: (s.path, s.line))
    return _truncated(
        w, f"`{called}` reads {what} cut by `.detach()` at {cut}, made of what its previous "
        f"call returned, beside a new input (its call at {', '.join(map(str, reads))}), and "
        f"{w.loss_label(site)} (backward at {site}) reads the outputs of both calls",
        "so no step is trained through the states that led to it",
        cut, states, held, edits, (cut, *reads), site)


def _uncut(w: WatchState, cut: Site) -> tuple[str | None, list]:
    """The name of the value cut at ``cut`` (``h`` of ``h.detach()``) and the edit that takes
    the cut away (:func:`~toolkit.audit.fixes.script_edits.detach_undone`)."""
    found = S.call_at(cut.path, cut.span)
    if found is None:
        return None, []
    call, text = found
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "detach"):
        return None, []
    edit = w.fixes.detach_undone(cut.path, cut.span)
    # a value a comprehension takes apart (``{k: v.detach() for k, v in state.items()}``) is
    # the container's
    value = S.iterated_by(cut.path, call.func.value) or call.func.value
    return S.segment(text, value) or None, [] if edit is None else [edit]
