"""Copies of a network: one the script names twice (``ema = model``, ``aliased``), a shallow
copy of what holds a network that an optimizer steps after it (``aliased``), a snapshot that
shares its storage with the weights it was taken from (``aliased``), and one it keeps in sync
with a stepped network but never reads while that network makes the target."""

from __future__ import annotations

import ast
import weakref
from typing import Any

import torch
from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.calls import storage_key
from toolkit.audit.record.frames import Site, site_of, user_frame
from toolkit.audit.record.tensors import keyed
from toolkit.audit.rules.running.kept_in_sync import swap_call
from toolkit.audit.rules.running.state import WatchState

__all__ = ["aliased", "cleared_through", "filled", "kept_in_sync", "moved_toward_itself",
           "rebound", "recorded", "registered", "shallow", "shared", "snapshot", "snapshots"]


def aliased(w: WatchState) -> None:
    """One network called by two names, one only under no_grad (a target, an EMA or
    teacher copy read as a constant a loss meets) and one with gradients, its tensors stepped: the
    target is the trained network itself (``ema = model``, or ``copy.copy(model)``, whose
    layers are the model's own, for ``copy.deepcopy(model)``).
    One network read both ways by one name (FixMatch's pseudo-labels) is no finding."""
    stepped = w.stepped_map()
    names = w.names()
    # a shallow copy (``copy.copy(model)``) is another module holding the same tensors: the
    # calls of every module holding one set of tensors are one network's
    # (a wrapper that holds the other as a part, DDP's or a Sequential's, is no copy: its
    # calls stay its own)
    # (and a module whose tensors are others, each rebound to the same storage, ``tp.data =
    # p.data``: its values are the trained network's, step for step)
    networks: dict[tuple[int, frozenset, frozenset], tuple[Any, dict[str, set]]] = {}
    rebound: set[tuple[int, frozenset, frozenset]] = set()
    for key, by_name in w.called_as.items():
        module = w.roots[key][0]
        held = frozenset(id(p) for p in module.parameters())
        if not held:
            continue
        stored = frozenset(storage_key(p) for p in module.parameters())
        same = next((k for k, (other, _) in networks.items()
                     if (k[1] == held or (k[2] == stored and len(stored) == len(held)))
                     and not any(m is other for m in module.modules())
                     and not any(m is module for m in other.modules())), (key, held, stored))
        if same[1] != held:
            rebound.add(same)
        # the group is known by the module an optimizer steps (a rebound copy's tensors are
        # other objects)
        had = networks.get(same)
        if had is None or (not any(id(p) in stepped for p in had[0].parameters())
                           and any(id(p) in stepped for p in module.parameters())):
            networks[same] = (module, had[1] if had is not None else {})
        uses = networks[same][1]
        for name, found in by_name.items():
            uses.setdefault(name, set()).update(found)
    # where a no_grad call's output became a constant that a loss's graph met: a target (a
    # no_grad read that feeds no loss, a metric or a check, is no target)
    fed = {(site, name) for _, site, name in w.fed_constants}
    found: dict[tuple[str, str], tuple] = {}
    for group, (module, by_name) in networks.items():
        params = [p for p in module.parameters() if id(p) in stepped]
        # in one iteration: one name only under no_grad, read as a target, another with
        # gradients; the same attribute reached from two places (w.teacher, model.teacher)
        # is one binding
        # (a name trained under itself in another phase, a teacher before its student is
        # made from it, is read as a target where it is)
        pairs = [(t, o) for t, t_uses in by_name.items()
                 for o, o_uses in by_name.items()
                 if (t.rpartition(".")[2] != o.rpartition(".")[2] or _holders(w, t, o) != (t, o))
                 and ({i for g, s, i in t_uses if not g and (s, t) in fed}
                      - {i for g, _, i in t_uses if g})
                 & {i for g, _, i in o_uses if g}]
        if not params or not pairs:
            continue
        # the pair whose assignment the edit finds (``target_net = copy.copy(online)``, not
        # a method's ``self`` that the target's calls pass through), else the first
        chosen = None
        for called, trained in pairs:
            sites = list(dict.fromkeys(s for g, s, _ in by_name[called] if not g))
            target, trained = _holders(w, called, trained)
            fix = next((f for site in sites if (f := w.fixes.copy_at_alias(
                site.path, target.split("(")[0], trained)) is not None), None)
            # an item's container copied whole (``q_target_nets = list(q_nets)``)
            copied = target.split("[")[0] if fix is not None and "[" in target else target
            if fix is None:
                # the trained name bound to the target (``student = teacher``, progressive
                # distillation's student made from its teacher): the trained one the copy
                fix = next((f for site in sites if (f := w.fixes.copy_at_alias(
                    site.path, trained.split("(")[0], target.split("(")[0])) is not None),
                    None)
                copied = trained if fix is not None else target
            if fix is None and group in rebound:
                # the storage rebound where the copy was meant (``tp.data = p.data``): the
                # values copied instead
                fix = next((f for path in dict.fromkeys(s.path for s in sites)
                            if (f := w.fixes.data_copied(path)) is not None), None)
                copied = None if fix is not None else copied
            if chosen is None or (fix is not None and chosen[3] is None):
                chosen = (target, trained, sites, fix, copied)
        target, trained, sites, fix, copied = chosen
        shown = tuple(names.get(id(p), "?") for p in params)
        if (target, trained) in found:   # another part of one holder aliased (its submodules)
            found[target, trained][5].extend(shown)
            continue
        found[target, trained] = (target, trained, sites, fix, copied, list(shown))
    for target, trained, sites, fix, copied, shown in found.values():
        source = target if copied == trained else trained
        line = (Site(sites[0].path, fix[0], None) if fix is not None and sites else None)
        at = ((line.shown(),) if line is not None else ()) + tuple(
            sorted({s.shown() for s in sites}))
        shown = tuple(shown)
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"`{target}` and `{trained}` are one network: `{target}` is read under no_grad "
            f"as a target while `{trained}` trains, so the target is the trained network "
            f"itself", shown, shown, at, tuple(fix[1]) if fix is not None else (),
            advice=_copy_advice(copied, source, fix, line),
            step=w.step_events - 1, concerned=shown))


def _copy_advice(copied: str | None, source: str, fix, line: Site | None) -> str:
    """What the edit of an alias does, in words: the assignment made a copy, or, where the
    fix puts a copy in the container the target is read from (``target_nets.append(q_net)``,
    a statement that assigns nothing), that statement's edit; ``copied`` ``None``: the values
    copied where the storage was rebound (``tp.data = p.data``)."""
    if copied is None and fix is not None and line is not None:
        return f"copy the values, not the storage ({line}): {fix[1][0].new}"
    if fix is not None and line is not None and S.assigned_name(line.path, line.line) is None:
        return f"put a copy of `{source}` there ({line}): {fix[1][0].new}"
    return f"make `{copied}` a copy: {copied} = " + (
        fix[1][0].new if fix is not None else f"copy.deepcopy({source})")

def moved_toward_itself(w: WatchState, moves: list) -> None:
    """Writes without a graph into tensors an optimizer steps (or that a network two names
    bind holds: frozen through the name meant for the copy, no optimizer steps them) of values
    computed from those tensors themselves as another operand (``ema_p.mul_(d).add_(p,
    alpha=1 - d)``, ``torch._foreach_lerp_(ema, params, w)``), recorded by the staged
    recording, where the script's names bind two names to the network that holds them
    (``ema_model = net_model`` for ``copy.deepcopy(net_model)``): the update meant to move a
    copy toward the trained network moves each of its tensors toward itself, so the copy (an
    EMA kept for sampling or evaluation, a target network) is the trained network. The edit
    makes the assignment a deep copy. One name for the network (a weight decay written by
    hand, ``p.add_(p, alpha=-wd)``) is no finding, nor is a network :func:`aliased` names
    already (the copy read as a target). ``moves`` is drained."""
    found, moves[:] = list(moves), []
    if not found:
        return
    stepped = w.stepped_map()
    by_storage = _by_storage(w)
    names = w.names()
    by_module = _names_by_module(w.scope)
    # or a tensor of a network two names bind, which no optimizer steps (frozen through the
    # name meant for the copy: ``teacher_head = student_head``, then the teacher's freeze)
    for module, bound in by_module.values():
        if len(bound) > 1:
            for p in module.parameters():
                by_storage.setdefault(storage_key(p), ("", p))
    done: set[int] = set()
    for _, view, line in found:
        hit = by_storage.get(storage_key(view))   # the tensor whose elements it is
        if hit is None:
            continue
        t = hit[1]
        for key, (module, bound) in by_module.items():
            if key in done or len(bound) < 2 or not any(p is t for p in module.parameters()):
                continue
            done.add(key)
            paths = dict.fromkeys([*([line.path] if line is not None else []),
                                   *w.user_paths.values()])
            fix = next(((copy, online, f) for path in paths for copy in bound
                        for online in bound if copy != online
                        if (f := w.fixes.copy_at_alias(path, copy, online)) is not None), None)
            copy, online = (fix[0], fix[1]) if fix is not None else (bound[0], bound[1])
            params = [p for p in module.parameters() if id(p) in stepped] or \
                list(module.parameters())
            shown = tuple(names.get(id(p), "?") for p in params)
            if any(f.kind == "aliased" and set(f.extra.get("moved", f.concerned)) & set(shown)
                   for f in w.findings.values()):
                continue   # named already, read as a target (:func:`aliased`)
            at = ((Site(line.path, fix[2][0], None).shown(),) if fix and line else ()) + (
                (str(line),) if line is not None else ())
            w.add(ScriptFinding(
                "aliased", w.iteration,
                f"`{copy}` and `{online}` are one network: the script moves `{copy}` toward "
                f"`{online}` (an EMA or a target network's update), which moves each of its "
                f"tensors toward itself, so `{copy}` holds none of the past weights it is kept "
                f"for", shown, shown, at, tuple(fix[2][1]) if fix is not None else (),
                advice=f"make `{copy}` a copy: {copy} = copy.deepcopy({online})",
                # the update writes the trained weights themselves, and whatever reads the
                # copy (a target, a predictor on the encoder) reads them: a copy parts from
                # them at the first update, wherever the update is found (a target network
                # loaded every few steps), and every gradient may change from there
                step=0, concerned=("*",), extra={"moved": shown}))


def rebound(w: WatchState, opt: torch.optim.Optimizer, built: Site | None,
            scope: dict[str, object]) -> None:
    """An optimizer built inside a loop (at ``built``; ``scope``: the names its line sees) over
    a network that a plain assignment in the same loop binds to the name the optimizer reads
    (``local_model = global_model``, a model soup's ``finetuned = pretrained``, a task
    vector's ``model = base``): each pass means to train a fresh copy (the published code's
    ``copy.deepcopy``), and trains the one network on instead, each pass from where the last
    one left it, while the other name, meant to hold the weights the passes start from, holds
    the same trained tensors. The edit makes the assignment a deep copy. A network chosen per
    pass (``expert = experts[k]``) or built per pass is another network each time, and one
    network given a fresh optimizer with no second name (continual learning with its state
    reset) is no finding. Judged once per building line."""
    if built is None or built.span is None:
        return
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    w._once(("rebound", built.path, built.line), lambda: _rebound(w, built, scope, held))


def _rebound(w: WatchState, built: Site, scope: dict[str, object], held: set[int]) -> bool:
    loop = S.loop_around(built.path, built.line)
    if loop is None:
        return False
    read = S.argument_names(built.path, built.span)
    names = None
    for module, bound in _names_by_module(scope).values():
        params = [(n, p) for n, p in module.named_parameters() if id(p) in held]
        if len(bound) < 2 or not params:
            continue
        # the name the optimizer reads, bound from another in the loop, above the build
        fix = next(((copy, online, f) for copy in bound if copy in read for online in bound
                    if online != copy
                    and (f := w.fixes.copy_at_alias(built.path, copy, online)) is not None
                    and loop[0] < f[0] < built.line), None)
        if fix is None:
            continue
        copy, online, (line, edits) = fix
        names = w.names() if names is None else names
        # (an optimizer built before the first backward: its tensors named by the network)
        shown = tuple(names.get(id(p)) or f"{online}.{n}" for n, p in params)
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"`{copy}` and `{online}` are one network: each pass of the loop binds `{copy}` to "
            f"`{online}` itself and builds an optimizer over it, so each pass trains "
            f"`{online}` on from where the last one left it, and `{online}` keeps none of the "
            f"weights the passes were meant to start from", shown, shown,
            (Site(built.path, line, None).shown(), built.shown()), tuple(edits),
            advice=f"make `{copy}` a copy: {copy} = copy.deepcopy({online})",
            # a copy trains apart from the network from the first pass on: every gradient
            # after it may change
            step=0, concerned=("*",), extra={"moved": shown}))
    return True


def cleared_through(w: WatchState, clear: Site) -> tuple[str, str, int, list[Edit]] | None:
    """A clear at ``clear`` made through a second name of the network whose gradient it cleared
    (``previous.zero_grad()`` after the model's backward, where ``previous`` and ``model`` bind
    one network): where the script calls the network by that name with gradients (a network of
    its own to it, a variance-reduced gradient's previous iterate or snapshot) and a plain
    assignment binds it from the other name (``previous = model`` for
    ``copy.deepcopy(model)``), the clear is the alias at work. The two names, the assignment's
    line and the edits that make it a deep copy; ``None`` for a clear through the network's
    one name, or a name bound by no such assignment (a clear to move, not a copy to make)."""
    found = S.call_at(clear.path, clear.span)
    func = found[0].func if found is not None else None
    if not (isinstance(func, ast.Attribute) and func.attr == "zero_grad"
            and isinstance(func.value, ast.Name)):
        return None
    copy = func.value.id
    module = w.scope.get(copy)
    if not isinstance(module, nn.Module) or not any(
            g for g, _, _ in w.called_as.get(id(module), {}).get(copy, ())):
        return None
    for online, value in w.scope.items():
        if value is module and online != copy and online.isidentifier() \
                and not online.startswith("_"):
            fix = w.fixes.copy_at_alias(clear.path, copy, online)
            if fix is not None:
                return copy, online, fix[0], fix[1]
    return None


def registered(w: WatchState, new: object) -> None:
    """A parameter or a submodule registered on a module (torch's registration hooks, before the
    module holds it): one registered on another module before is shared from here on, noted
    with the user's line that shares it (:func:`shared` judges it)."""
    if not isinstance(new, nn.Module | nn.Parameter):
        return
    seen = w.registered_once.get(id(new))
    if seen is None or seen() is not new:
        w.registered_once[id(new)] = weakref.ref(new)
        return
    frame = user_frame(1)
    if frame is not None:
        w.shared_at.append((new, site_of(frame), w.events))


def shared(w: WatchState) -> None:
    """A parameter or a submodule shared by assignment (:func:`registered`) between a network
    the script reads only under ``no_grad`` for what a loss meets (a teacher's soft targets)
    and another that it calls with gradients, where an optimizer steps the shared tensors
    (DistilBERT's student made from its teacher's blocks, ``student.blocks[i] =
    teacher.blocks[2 * i]``; a low-precision student started from its teacher's weights,
    ``q.weight = linear.weight``): each step moves the targets with the student. The edit
    copies at the sharing line. Shared tensors no optimizer steps (a teacher's classifier
    reused frozen), tied within one network (an embedding and its output layer), or between
    networks that both train with gradients, are none; so is a network read under no_grad
    whose own tensors an optimizer steps after the sharing (SAC-AE's and DBC's actor, whose
    encoder is tied to the critic's and read under no_grad for the critic's target): a
    network that trains, not a target. Judged at the end of the run, when every step is
    known."""
    if not w.shared_at:
        return
    stepped = w.stepped_map()
    fed = {(site, name) for _, site, name in w.fed_constants}
    found: dict[tuple[str, int], tuple[Site, tuple[str, str], list[int]]] = {}
    every = {id(p) for held, _, _ in w.shared_at
             for p in ([held] if isinstance(held, torch.Tensor) else held.parameters())}
    networks = [w.roots[key][0] for key in w.called_as]
    for entry in list(w.shared_at):
        held, site, since = entry
        params = [held] if isinstance(held, torch.Tensor) else list(held.parameters())
        ids = {id(p) for p in params if id(p) in stepped}
        if not ids:
            continue
        # by iteration: the networks holding them read only under no_grad, for what a loss
        # meets, and those called with gradients
        targets, trained = [], []
        for key, by_name in w.called_as.items():
            module = w.roots[key][0]
            if not any(id(p) in ids for p in module.parameters()):
                continue
            uses = [(g, s, n, i) for n, calls in by_name.items() for g, s, i in calls]
            with_grad = {i for g, _, _, i in uses if g}
            trained.append((module, w.roots[key][1], with_grad))
            targets.append((module, w.roots[key][1], {i for g, s, n, i in uses
                                                      if not g and (s, n) in fed} - with_grad))
        # a network whose own tensors (or those of a network holding it) train after the
        # sharing is no target
        targets = [t for t in targets if not any(
            any(m is t[0] for m in holder.modules()) and any(
                w.stepped_at.get(id(p), -1) > since for p in holder.parameters()
                if id(p) not in every) for holder in networks)]
        # the networks themselves, not a layer one calls by its name (largest first)
        targets.sort(key=lambda t: -sum(1 for _ in t[0].parameters()))
        trained.sort(key=lambda t: -sum(1 for _ in t[0].parameters()))
        pair = next(((t_name, n_name) for target, t_name, read in targets
                     for net, n_name, learned in trained if read & learned
                     and not any(m is target for m in net.modules())
                     and not any(m is net for m in target.modules())), None)
        if pair is None:
            continue
        w.shared_at.remove(entry)
        *_, ids_at = found.setdefault((site.path, site.line), (site, pair, []))
        ids_at.extend(i for i in ids if i not in ids_at)
    names = w.names() if found else {}
    for site, (target, net), ids in found.values():
        shown = tuple(names.get(i, "?") for i in ids)
        edits = w.fixes.copy_where_shared(site.path, site.line)
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"`{target}`, read under no_grad for what a loss meets, shares {len(ids)} tensors "
            f"with `{net}`, which trains, by the assignment at {site}: each step of `{net}` "
            f"moves them, so `{target}`'s outputs move with it instead of staying as trained",
            shown, shown, (site.shown(),), tuple(edits or ()),
            advice="give the trained network a copy where the assignment shares them: "
                   "copy.deepcopy(...)",
            # the copy parts from the first step after it: every gradient may change
            step=0, concerned=("*",), extra={"moved": shown}))


def _names_by_module(scope: dict[str, object]) -> dict[int, tuple[nn.Module, list[str]]]:
    """The networks ``scope`` binds, by ``id``, each with the plain names that bind it (not
    ``self``, nor a private name): two names of one network are an alias."""
    by_module: dict[int, tuple[nn.Module, list[str]]] = {}
    for name, value in scope.items():
        if isinstance(value, nn.Module) and name.isidentifier() and not name.startswith("_") \
                and name != "self":
            by_module.setdefault(id(value), (value, []))[1].append(name)
    return by_module


def _by_storage(w: WatchState) -> dict[object, tuple[str, torch.Tensor]]:
    """Each tensor an optimizer holds, with its key, by its storage (what a view of its
    elements shares with it)."""
    return {storage_key(p): (k, p) for i, o in enumerate(w.optimizers) for k, p in keyed(i, o)}


def _holders(w: WatchState, target: str, trained: str) -> tuple[str, str]:
    """Two names of one network that end in the same attribute (``net_prime.q``, ``net.q``):
    their holders' names when the script's scope binds both to one object (``net_prime =
    net``: the holder is aliased, option-critic's target network), else the names as they
    are (``w.teacher`` and ``model.teacher``, one attribute reached from two objects). A
    holder a call binds (a method's ``self``, ``low.train()``'s ``low``; a helper's
    parameter) is the object it was handed, by no assignment of the script: no alias."""
    a, b = target.rpartition(".")[0], trained.rpartition(".")[0]
    if a != b and a.isidentifier() and b.isidentifier() and not {a, b} & w.handed and \
            w.scope.get(a) is not None and w.scope.get(a) is w.scope.get(b):
        return a, b
    return target, trained


def snapshots(w: WatchState, differences: list, *, restores: bool = False) -> None:
    """Differences the script computed between two views of the elements of tensors an
    optimizer steps (``weights_after[k] - weights_before[k]`` of two ``state_dict()`` calls,
    ``fast - slow`` with ``slow = p.detach()``), recorded by the staged recording: zero
    whatever the weights, so the snapshot meant to hold the values from before the steps
    moves with them (Reptile's outer step and Lookahead's slow weights do nothing). With
    ``restores``, writes into such tensors of values read from a snapshot of their own elements
    (a rewind to the initial weights, a reset to the state before adaptation): the restore
    writes the values of now. The edit makes the assignment that took the snapshot take a copy
    (``copy.deepcopy``, ``.clone()``), found by the name the script holds it by;
    ``differences`` is drained."""
    found, differences[:] = list(differences), []
    if not found:
        return
    stepped = _by_storage(w)
    names = w.names()
    # each snapshot, by where the script holds it, with the edit that copies it there
    by_holder: dict[tuple[str, str] | None, tuple[list, list, Any]] = {}
    for _, subtracted, line, held in found:
        hit = stepped.get(storage_key(subtracted))
        if hit is None:
            continue
        # by the name the script holds it by; else, for an attribute bound from what a
        # helper returned (``self.model_state, ... = copy_model_and_optimizer(model, ...)``),
        # by the attribute's own name where the helper binds it (``model_state = ...``)
        named = [*held, *((path, name.rsplit(".", 1)[1]) for path, name in held if "." in name)]
        holder, fix = next(((where, f) for where in named
                            if (f := w.fixes.copy_snapshot(where[0], where[1])) is not None),
                           (None, None))
        tensors, reads, _ = by_holder.setdefault(holder, ([], [], fix))
        if hit not in tensors:
            tensors.append(hit)
        if line is not None and line not in reads:
            reads.append(line)
    for holder, (tensors, reads, fix) in by_holder.items():
        if holder is not None and holder in w.snapshots_found:
            continue   # found at an earlier step (of the optimizer of another round)
        if holder is not None:
            w.snapshots_found.add(holder)
        at = ((Site(holder[0], fix[0], None).shown(),) if holder and fix else ()) + tuple(
            Site(r.path, r.number, None).shown() for r in reads[:1])
        keys = tuple(k for k, _ in tensors)
        shown = ((holder[1],) if holder else ()) + tuple(names.get(id(p), k) for k, p in tensors)
        what = f"`{holder[1]}`" if holder else "a snapshot"
        done = ("the script restores them from it, which writes their values of now"
                if restores else
                "the difference the script takes between them is zero whatever the weights")
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"{what} shares its storage with {len(tensors)} tensors an optimizer steps: "
            f"{done}, so the snapshot meant to hold their values from before the steps moves "
            f"with them",
            keys, shown, at, tuple(fix[1]) if fix is not None else (),
            advice=f"make {what} a copy where it is taken (copy.deepcopy(model.state_dict()), "
                   f"p.detach().clone())",
            step=w.step_events - 1, concerned=keys))


def recorded(w: WatchState, rec: Any) -> None:
    """What the staged recording ``rec`` saw of snapshots and aliases, judged at a step and at
    the end: differences of a snapshot and what it was taken from, restores from one, moves
    toward itself (:func:`snapshots`, :func:`moved_toward_itself`) and data filled through an
    alias (:func:`filled`)."""
    snapshots(w, rec.alias_differences)
    snapshots(w, rec.alias_restores, restores=True)
    moved_toward_itself(w, rec.alias_moves)
    filled(w, rec.filled_reads)


def filled(w: WatchState, reads: list) -> None:
    """A ``.detach()`` (or ``.data``) of data, taken for a buffer of fresh values without a
    copy (``noise = x.detach()``, then ``noise.normal_()``): it shares ``x``'s storage, so the
    fill overwrites ``x``, and the script reads ``x`` after it (``x + sigma * noise``, Deep
    Image Prior's input regularisation; a batch of noise samples beside the data they were
    taken from). Recorded by the staged recording; ``reads`` is drained. The edit makes the
    assignment that took the alias take a copy (``x.detach().clone()``), as drawing into a
    tensor of its own does (``torch.randn_like(x)``)."""
    found, reads[:] = list(reads), []
    for source_ref, how, taken, fill, alias, read in found:
        source = source_ref()
        where = taken or fill
        if where is None or where.path is None:
            continue
        alias = alias or S.assigned_name(where.path, where.number)
        fix = w.fixes.copy_snapshot(where.path, alias) if alias else None
        if (where.path, alias) in w.fills_found:
            continue
        w.fills_found.add((where.path, alias))
        name = (w.bound_name(source) if source is not None else None) or "the data"
        places = [(taken.path, taken.number)] if taken is not None else \
            [(where.path, fix[0])] if fix is not None else []
        places += [(line.path, line.number) for line in (fill, read)
                   if line is not None and line.path]
        at = tuple(Site(path, number, None).shown() for path, number in dict.fromkeys(places))
        held = f"`{alias}`" if alias else f"a `{how}` of {name}"
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"{held} shares its storage with `{name}` (`{how}` cuts without a copy): "
            f"filling it in place with fresh values overwrites `{name}`, which the script "
            f"reads after the fill{f' (line {read.number})' if read is not None else ''}, "
            f"so it reads those values, not its own",
            ((alias,) if alias else ()) + (name,), ((alias,) if alias else ()) + (name,), at,
            tuple(fix[1]) if fix is not None else (),
            advice=f"take a copy where the alias is made ({name}{how}.clone()), or draw into "
                   f"a tensor of its own (torch.randn_like({name}))",
            step=w.step_events - 1, concerned=("*",)))


def snapshot(w: WatchState) -> None:
    """The values of the networks the script holds and never calls (at each step and at
    the end): a copy kept in sync is one moved toward a stepped network."""
    online = [m for m, _ in w.roots.values()] + [m for m, _ in w.holders.values()]
    w.sync.snapshot(set(w.called_as), set(w.stepped_map()), online)


def kept_in_sync(w: WatchState) -> None:
    """A network the script keeps in sync with a stepped one (a Polyak or EMA copy, a
    copy outright) and never reads, while that stepped network is called under no_grad
    where its output is a constant a loss's graph meets (a TD target, a teacher's
    targets): the constant was meant to come from the copy. The edit calls the copy
    there, by the name the script holds it by. A copy kept for evaluation only (no loss
    reads the stepped network's no_grad output), or of a network with no tensor that
    requires grad (a frozen target network copied with the whole model), is no finding."""
    if not w.sync.copies:
        return
    stepped = w.stepped_map()
    names = w.names()
    for copy in w.sync.copies.values():
        online = copy.online
        # a network none of whose tensors trains (itself a target network, frozen, moved
        # toward another by the script: SPR's target encoder) is not the trained network
        if not any(p.requires_grad for p in online.parameters()):
            continue
        # a part of a whole copy the script reads (TD-MPC's target model, whose encoder and Q
        # networks make the target, moved toward the model as one): kept in sync with the
        # rest of it, not made to be a constant of its own
        if _part_of_a_read_copy(w, copy.copy):
            continue
        fed = {(s, name): when for (key, s, name), when in w.fed_constants.items()
               if key == id(online)}
        if not fed:
            continue
        sites = list(dict.fromkeys(s for s, _ in fed))
        iteration, step = min(fed.values())
        spelled = {name for _, name in fed}
        edits = []
        for site in dict.fromkeys(sites):
            for name in spelled:
                e = swap_call(w.fixes, site, name.split("(")[0], copy.name)
                if e is not None:
                    edits.append(e)
                    break
        held = {id(p): (k, p) for i, o in enumerate(w.optimizers)
                for k, p in keyed(i, o) if id(p) in stepped}
        params = [p for p in online.parameters() if id(p) in held]
        keys = tuple(held[id(p)][0] for p in params)
        shown = tuple(names.get(id(p), "?") for p in params)
        which = next(iter(spelled), "the trained network")
        w.add(ScriptFinding(
            "aliased", iteration,
            f"`{copy.name}` is kept in sync with `{which}` (moved toward it after its "
            f"steps) and never read, while `{which}` itself, called under no_grad, makes "
            f"the constant the loss compares with: the target is read from the trained "
            f"network instead of its copy",
            keys, shown, tuple(s.shown() for s in dict.fromkeys(sites)), tuple(edits),
            advice=f"read the target from `{copy.name}`, the copy kept for it",
            step=step, concerned=keys))


def _part_of_a_read_copy(w: WatchState, part: nn.Module) -> bool:
    """Whether ``part`` is held by a network (a namespace of the script that is a module)
    whose other modules the script calls."""
    inside = {id(m) for m in part.modules()}
    for _, space in w.sync.namespaces.values():
        if isinstance(space, nn.Module) and any(m is part for m in space.modules()) and any(
                id(m) in w.roots for m in space.modules() if id(m) not in inside):
            return True
    return False


def shallow(w: WatchState) -> None:
    """``copy.copy(x)`` in the script, where ``x`` is a network or holds one (in a dict, a list,
    a plain object) whose tensors an optimizer steps after the copy was made: the copy holds
    the same network, not a new one, so whatever the script does through "the copy" (trains
    it, moves it toward another, keeps it as a fixed version) it does to the original. The
    edit makes it ``copy.deepcopy(x)``. A copied module with a forward of its own counts only
    when it is called after such a step (a copy that only gets an attribute of its own, read at
    once, is a shallow copy on purpose); a copied container of layers (``nn.ModuleList``) when
    the script still holds it at the end. A copy of what holds no network, or of a network no
    step moves after it, is no finding; nor is a copy another ``aliased`` finding already names
    at its line."""
    stepped = w.stepped_map()
    done: set[tuple[str, int]] = set()
    for made in w.shallow_copies:
        site = made.site
        if made.first_step is None or (site.path, site.line) in done:
            continue  # no step after it, or a copy made again at a line already found
        if made.module is not None:
            copied = made.module()
            container = copied is not None and type(copied).forward is nn.Module.forward
            if not (made.called_after or container):
                continue
        name = S.assigned_name(site.path, site.line) or "the copy"
        # every copy the line makes (``a, b = copy.copy(x), copy.copy(y)``), each by the name
        # it is assigned to where the line assigns one per copy
        line = [m for m in w.shallow_copies if m.site.path == site.path
                and m.site.line == site.line and m.first_step is not None]
        spans = list(dict.fromkeys(m.site.span for m in line))
        names = [n.strip() for n in name.split(",")]
        params = {id(p): f"{names[spans.index(m.site.span)] if len(names) == len(spans) else name}"
                         f"{key}.{pname}" for m in line for key, net in m.networks
                  for pname, p in net.named_parameters() if id(p) in stepped}
        if not params or any(f.kind == "aliased" and site.shown() in f.at
                             for f in w.findings.values()):
            continue
        done.add((site.path, site.line))
        edits = tuple(e for span in spans if (e := w.fixes.deep_copy_call(site.path, span)))
        shown = tuple(params.values())
        w.add(ScriptFinding(
            "aliased", made.iteration,
            (f"`{name}` is a shallow copy (copy.copy) of what holds a network whose "
             f"{len(params)} tensors an optimizer steps after it: the copy holds that same "
             f"network, so training, moving or keeping \"the copy\" acts on the original"
             if len(spans) == 1 else
             f"{', '.join(f'`{n}`' for n in names)} are shallow copies (copy.copy) of what "
             f"holds networks whose {len(params)} tensors an optimizer steps after them: each "
             f"copy holds the same network, so training, moving or keeping \"the copy\" acts "
             f"on the original"),
            shown, shown, (site.shown(),), edits,
            advice="copy it with copy.deepcopy, which copies the networks it holds",
            step=max(made.steps - 1, 0), concerned=("*",)))
