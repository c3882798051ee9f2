"""At the end of an audited iteration: gradient in tensors no optimizer steps, between a loss
and stepped tensors or part of a model whose other tensors are stepped (``unstepped``, with
the parameter group that adds them), or elsewhere (``wasted``, a note).

- Learned tensors torch does not register as parameters (plain tensors that require grad,
  parameters of no module, plain containers): :mod:`.not_parameters`. The group an edit adds
  follows the script's settings (:mod:`.param_group`)."""

from __future__ import annotations

import ast

import torch
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site
from toolkit.audit.result import plural
from toolkit.audit.rules.running import copies
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.rules.running.not_parameters import (
    beside_learned_siblings,
    bounded_constants,
    free_parameters,
    in_plain_containers,
    plain_tensors,
)
from toolkit.audit.rules.running.param_group import group
from toolkit.audit.rules.running.replaced import replaced
from toolkit.audit.rules.running.state import WatchState

__all__ = ["end_of_iteration", "never_stepped"]


def end_of_iteration(w: WatchState) -> None:
    """Gradient in tensors no optimizer steps. Between a loss and the tensors an optimizer
    steps (a predictor on a trained encoder, a head left out of its model's optimizer),
    or part of a model whose other tensors are stepped: the loss trains them and no step
    uses it, a failure at the optimizer's line, with the parameter group that adds them.
    Or reached by the loss of an optimizer that holds none of the tensors its loss reaches
    (built over the wrong network, wherever these lie): a failure whose edit replaces its
    argument. Elsewhere (a backbone below a trained head, a target network read on data):
    wasted work, a note."""
    copies.aliased(w)
    earlier = w.of_earlier_loops()
    gone = _rebound(w) | earlier
    held = w.stepped_map()
    # and what only a later phase's optimizer holds, where this iteration's step was
    # misplaced for it (:func:`.dead.is_misplaced`): no optimizer steps it in this phase
    later = w.held_for_later[1] if w.held_for_later[0] == w.iteration else set()
    stepped = {k: i for k, i in held.items() if i not in gone and k not in later}
    _held_by_unused(w)
    replacing = replaced(w, stepped)
    free_parameters(w, stepped)
    plain_tensors(w, stepped)
    beside_learned_siblings(w, stepped)
    bounded_constants(w, stepped)
    # a gradient an optimizer holding the tensor stepped already: the last of an earlier loop,
    # or of an optimizer the script has just replaced by a fresh one not yet stepped (a new
    # Adam for each generation of AlphaZero's network, built before its first backward)
    holding: dict[int | None, set[int]] = {}
    done = {key for key, live in w.ledger.live.items()
            if live and key not in stepped and key in held and all(
                s.step is not None and key in _held_by(w, w.step_optimizer.get(s.step),
                                                        holding) for s in live)}
    replacing |= in_plain_containers(w, stepped.keys() | done)
    names = w.names()
    by_root: dict[int, list[int]] = {}
    orphans: set[int] = set()   # of no network the script calls (a policy's own log_std)
    for key, live in w.ledger.live.items():
        if key in stepped or not live or key in replacing or key in done:
            continue
        owner = w.owner(key)
        if owner is None:
            orphans.add(key)
            continue
        by_root.setdefault(id(owner), []).append(key)
    for module, name, keys in _wholes(w, by_root, stepped, orphans):
        trained = any(id(p) in stepped for p in module.parameters())
        inside = [k for k in keys if k in w.between]
        srcs = {s for k in keys for s in w.ledger.live[k] if s.site is not None}
        if not trained and not inside and all(
                s.index in w.read_sources for k in keys for s in w.ledger.live[k]):
            # a network no optimizer steps, between no loss and a stepped tensor, whose
            # gradient the script reads itself: computed to be used by hand (SVRG's snapshot,
            # whose gradient corrects the live model's: Johnson & Zhang 2013), not in vain
            continue
        at = tuple(sorted({s.site.shown() for s in srcs}))
        order = {id(p): i for i, p in enumerate(module.parameters())}
        keys.sort(key=lambda k: order.get(k, len(order)))
        shown = tuple(names.get(k, "?") for k in keys)
        # an optimizer whose own loss reaches these tensors and none it holds: its
        # argument is replaced by them, and its dead finding is this one (wherever they lie:
        # a second phase's head below a network read under no_grad is no wasted work)
        wrong = next((i for i, (reached, _) in sorted(w.misplaced.items())
                      if set(keys) <= reached), None)
        # a loss of its own whose backward trains nothing (every tensor it reaches is a
        # network's that no optimizer holds: CycleGAN's second discriminator left out of the
        # discriminators' optimizer): these are what it is for, and the optimizer stepped after
        # it in the iteration is the one it was meant for
        alone = (_stepped_after_alone(w, srcs, set(stepped))
                 if not trained and not inside and wrong is None else None)
        # or set by the script itself from a network an optimizer steps (TD7's fixed encoder,
        # loaded from the encoder every few steps): its weights come from there
        source = _set_from(name, srcs, held, names) if wrong is None else None
        if source is not None or (not trained and not inside and wrong is None
                                  and alone is None):
            where = (f"the script sets them from `{source[1]}` at line {source[0]}"
                     if source is not None else
                     "reached only through the target the loss compares with"
                     if set(keys) <= w.target_side else "below every trained tensor")
            w.add(ScriptFinding(
                "wasted", w.iteration,
                f"{len(keys)} tensors of {name} get gradient that no optimizer uses ("
                f"{where}, so nothing else needs it): work done in vain",
                shown, shown, at, advice=f"{name}.requires_grad_(False) if they are meant "
                                         f"to stay as they are; else add them to an "
                                         f"optimizer"))
            continue
        opts = sorted({i for k in inside for i in w.between[k]}) or sorted(
            {stepped[id(p)] for p in module.parameters() if id(p) in stepped})
        if wrong is not None or alone is not None:
            opts = [wrong if wrong is not None else alone]
        elif (rebuilt := _rebuilt_over_another(w, set(keys), holding)) is not None:
            opts = [rebuilt]
        elif (twin := _copied_over(w, module, set(keys), holding)) is not None:
            opts = [twin]
        elif inside and (twin := _twin_held(w, module, set(keys), holding)) is not None:
            opts = [twin]
        opt = w.optimizers[opts[0]] if opts else None
        built = w.built_at.get(id(opt)) if opt is not None else None
        edits: tuple = ()
        opt_name = w.assigned(built)
        extra_concerned: tuple[str, ...] = ()
        swapped: tuple = ()
        if inside and set(inside) <= w.beside:
            what = ("no optimizer steps them, though the same loss trains, in terms beside "
                    "theirs, tensors an optimizer steps")
        elif inside:
            what = ("no optimizer steps them, though the loss's gradient reaches the tensors "
                    "an optimizer steps through them")
        elif alone is not None:
            what = ("no optimizer steps them, and the loss of their backward reaches no tensor "
                    "an optimizer steps: it trains nothing")
        else:
            what = f"no optimizer steps them, though an optimizer steps the rest of {name}"
        # or an optimizer each tensor of which another one holds too (a copy of the line
        # above it, left unedited): its own network is what it was meant to hold (this one,
        # where its tensors are these tensors' twins: MCD's opt_c2 built over C1, not C2,
        # chosen above)
        copied = wrong is None and opts and _held_elsewhere(w, opts[0], holding)
        # or the optimizer stepped after their loss alone holds only frozen tensors (BRAC's
        # actor optimizer built over the behaviour policy, frozen after its phase), or only
        # tensors no backward reached since it was built (SimPO's, built over the SFT model
        # the policy was copied from, which the second phase never calls): it is built over
        # the wrong network, and adding these to it would keep that mistake
        frozen = opt is not None and not any(
            p.requires_grad for g in opt.param_groups for p in g["params"])
        idle = alone is not None and opt is not None and (frozen or not any(
            w.reached_at.get(id(p), -1) > w.built_event.get(id(opt), -1)
            for g in opt.param_groups for p in g["params"]))
        # or the helper that steps it was handed it where another optimizer, named there
        # too, holds these tensors (``train(epoch, net2, net1, optimizer1)`` beside
        # ``optimizer2`` over net2): the argument is what was copied, not the constructor
        handed = _handed_instead(w, wrong, set(keys), holding) if wrong is not None else None
        if handed is not None:
            path, node, other = handed
            edits = (w.fixes.node_edit(path, node, other),)
            extra_concerned = _claimed(w, wrong)
            what = (f"the loss of `{node.id}`'s step trains them and none of the tensors it "
                    f"holds: it is handed `{node.id}` where `{other}` holds them")
            at = (Site(path, node.lineno, None).shown(), *at)
        elif (wrong is not None or copied or idle) and built is not None:
            # the network its tensors are read from written as this one where it is read
            # (the groups and filters the script built kept), else its argument replaced
            swapped = w.fixes.parameters_from(built.path, built.span, name) \
                if {id(p) for p in module.parameters()} <= set(keys) else ()
            e = swapped[0] if swapped else w.fixes.replace_parameters(
                built.path, built.line, _parameters_text(module, name, set(keys))) or \
                _walks_another(w, opts[0], module, name, built, holding)
            if e is not None:
                edits = swapped or (e,)
                opt_text = f"`{opt_name}`" if opt_name else "the optimizer"
                if wrong is not None:
                    extra_concerned = _claimed(w, wrong)
                    what = (f"the loss of {opt_text}'s step trains them and none of the "
                            f"tensors it holds: it is built over the wrong parameters")
                elif idle:
                    held = ("frozen tensors" if frozen
                            else "tensors no loss reached since it was built")
                    what = (f"the loss of their backward reaches no tensor an optimizer "
                            f"steps: {opt_text}, stepped after it, holds only {held}: "
                            f"it is built over the wrong parameters")
                else:
                    # the tensors it stepped a second time move differently once it is not
                    extra_concerned = tuple(names.get(k, "?") for k in holding[opts[0]])
                    what = (f"{opt_text} holds only tensors another optimizer steps too: it "
                            f"is built over the wrong parameters")
        elif built is not None and (walked := _walks_another(w, opts[0], module, name, built,
                                                             holding)) is not None:
            edits = (walked,)
        elif built is not None and opt_name:
            added = [p for p in module.parameters() if id(p) in set(keys)]
            # made after the optimizer was built (a head a method appends for a new task):
            # the group is added after the statement that made them, where they exist
            later = _made_after(w, opts[0], added, built)
            e = _widened(w.fixes, opt, module, name, set(keys), built) if later is None \
                else None
            if e is None and later is None and len(added) == sum(1 for _ in module.parameters()):
                # the list it is built over, taken from several networks, with this one too:
                # whatever else reads that list (a clip over it) holds it then
                e = w.fixes.listed_module(built.path, built.line, name)
            if e is None:
                params = _parameters_text(module, name, set(keys))
                e = w.fixes.insert_after(built.path, later or built.line,
                                   f"{opt_name}.add_param_group({group(w, opt, params, added)})")
            edits = (e,) if e is not None else ()
        sites = _built_sites(built) + at
        if any(f.kind == "unstepped" and f.tensors == shown and f.at[:1] == sites[:1]
               for f in w.findings.values()):
            continue   # found at an earlier iteration, by the loss that first reached them
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{len(keys)} tensors of {name} get gradient and {what}",
            shown, shown, sites, edits,
            advice=(f"hand it `{handed[2]}`" if handed is not None else
                    f"read its tensors from `{name}` where it reads them from "
                    f"`{edits[0].old}`" if swapped else
                    f"build {('`' + opt_name + '`') if opt_name else 'it'} over "
                    f"{_parameters_text(module, name, set(keys))}" if (copied or idle) and edits
                    else
                    f"add them to {('`' + opt_name + '`') if opt_name else 'the optimizer'}"
                    f" (optimizer.add_param_group({{'params': [...]}}), or in its "
                    f"constructor)"), step=w.step_events - 1,
            concerned=tuple(shown) + extra_concerned))


def _built_sites(built: Site | None) -> tuple[str, ...]:
    """The optimizer's line, and the lines that made the lists it was built over where the
    line hands names (``encoder_params = [*encoder.parameters(), *mu_head.parameters()]``
    before ``RMSprop(encoder_params)``, or the filters over ``named_parameters()`` that made
    each group's list): the fix is as right in any of them."""
    if built is None:
        return ()
    return (built.shown(), *(Site(built.path, made, None).shown()
                             for made in S.arguments_made_at(built.path, built.span)))


def _claimed(w: WatchState, wrong: int) -> tuple[str, ...]:
    """The misplaced ``wrong``-th optimizer's own tensors, which this finding is about too:
    its dead finding, waiting, is this one's."""
    w.pending_dead = [(f, v) for f, v in w.pending_dead if f.extra.get("misplaced") != wrong]
    return w.misplaced[wrong][1]


def _wholes(w: WatchState, by_root: dict[int, list[int]], stepped: dict[int, int],
            orphans: set[int]) -> list[tuple[nn.Module, str, list[int]]]:
    """Each called network with its tensors no optimizer steps (``by_root``), parts of one
    network the script names, no tensor of which an optimizer steps, taken together as that
    network (an actor called through its methods, whose body and heads are what it calls:
    ``actor``, not ``self.body``, ``self.mean`` and ``self.log_std``). So are parts the script
    names only inside the network's methods (``self.critic``) of a network one optimizer
    steps the rest of (GAIL's PPO Adam over a list of the policy's actor and mean head:
    ``policy``, its critic and ``log_std`` left out). A network taken so, none of whose
    tensors an optimizer steps, brings with it its own tensors of no called network among
    ``orphans`` (the policy's ``log_std``, read by its ``distribution`` method: DAgger's
    optimizer built over the snapshot, not the policy)."""
    named = w._held_by_names()
    unstepped = {k for k, live in w.ledger.live.items() if live and k not in stepped}

    def rest_of(m: nn.Module) -> bool:
        ids = {id(p) for p in m.parameters()}
        return len({stepped[k] for k in ids if k in stepped}) == 1 and \
            ids <= stepped.keys() | unstepped

    out: dict[int, tuple[nn.Module, str, list[int]]] = {}
    for root, keys in by_root.items():
        module, name = w.roots[root]
        own = name.startswith("self.")
        whole = next(((m, n) for m, n in named if m is not module and any(
            x is module for x in m.modules()) and (not any(
                id(p) in stepped for p in m.parameters()) or (own and rest_of(m)))), None)
        if whole is not None:
            module, name = whole
        out.setdefault(id(module), (module, name, []))[2].extend(keys)
    for module, _, keys in out.values():
        # a network no optimizer steps any of (taken whole by the optimizer built over the
        # wrong one); beside a stepped part, such a parameter is named by its own path
        if not any(module is m for m, _ in w.called_networks()) and \
                not any(id(p) in stepped for p in module.parameters()):
            keys.extend(id(p) for p in module.parameters() if id(p) in orphans
                        and id(p) not in keys)
    return list(out.values())


def _handed_instead(w: WatchState, index: int, keys: set[int],
                    cache: dict[int | None, set[int]]) -> tuple[str, ast.Name, str] | None:
    """Where the user's code handed the ``index``-th optimizer to the helper that steps it,
    and the name there of the one other optimizer that holds every tensor of ``keys``."""
    handed = w.handed_optimizers.get(index)
    if handed is None:
        return None
    path, node, names = handed
    others = [i for i, o in enumerate(w.optimizers)
              if i != index and id(o) in names and keys <= _held_by(w, i, cache)]
    if len(others) != 1 or not isinstance(node, ast.Name):
        return None
    # the name it was built as, where that is one of them (not a loop's name left bound)
    spelled = names[id(w.optimizers[others[0]])]
    built = w.assigned(w.built_at.get(id(w.optimizers[others[0]])))
    return path, node, built if built in spelled else spelled[0]


def _held_elsewhere(w: WatchState, index: int, cache: dict[int | None, set[int]]) -> bool:
    """Whether the ``index``-th optimizer holds tensors, another optimizer holds each of
    them too, and it stepped one of them with the gradient the other had stepped it with
    (``shared``: in the same iteration, not a later phase's optimizer over the network)."""
    mine = _held_by(w, index, cache)
    others: set[int] = set()
    for other in range(len(w.optimizers)):
        if other != index:
            others |= _held_by(w, other, cache)
    return bool(mine) and mine <= others and any(
        f.kind == "shared" and any(k.startswith(f"opt{index}.") for k in f.tensors)
        for f in w.findings.values())


def _walks_another(w: WatchState, index: int, module: nn.Module, name: str, built: Site,
                   cache: dict[int | None, set[int]]):
    """The edit that has the comprehension building the ``index``-th optimizer, one over each
    element of a sequence (``[Adam(q.parameters()) for q in qf1]``), walk the sequence
    ``name`` (``module``, or the one it is an element of) instead (``qf2``, a copy of the line
    above left unedited), where other optimizers hold every tensor it holds now: nothing they
    step is lost. ``None`` where the line is no such comprehension."""
    sequence = name.split("[")[0].split(".")[0]
    mine = _held_by(w, index, cache)
    others = set().union(*(_held_by(w, i, cache) for i in range(len(w.optimizers))
                           if i != index))
    listed = isinstance(module, nn.ModuleList) or sequence != name
    if not listed or not sequence.isidentifier() or not mine or not mine <= others:
        return None
    return w.fixes.built_over_each(built.path, built.line, sequence)


def _set_from(name: str, sources, held: dict[int, int],
              names: dict[int, str]) -> tuple[int, str] | None:
    """The first line of a loss's file that sets the network ``name`` from the state of a
    network whose tensors an optimizer holds (``name.load_state_dict(other.state_dict())``),
    with that network's name; ``None`` where there is none."""
    loads = [found for path in sorted({s.site.path for s in sources})
             for found in S.loaded_from(path, name) if found[1] != name]
    if not loads:   # the common case: nothing to name the trained tensors for
        return None
    trained = {names.get(k, "") for k in held}
    return next(((line, other) for line, other in loads
                 if any(t.startswith(f"{other}.") for t in trained)), None)


def _copied_over(w: WatchState, module: torch.nn.Module, keys: set[int],
                 cache: dict[int | None, set[int]]) -> int | None:
    """The one optimizer :func:`_held_elsewhere` whose tensors have, in order, the shapes of
    ``module``'s tensors whose ids are ``keys`` (a network's twin: the line that built it
    copied from the one above, its argument left as it was), else ``None``."""
    shapes = [p.shape for p in module.parameters() if id(p) in keys]
    found = [i for i, opt in enumerate(w.optimizers)
             if [p.shape for g in opt.param_groups for p in g["params"]] == shapes
             and _held_elsewhere(w, i, cache)]
    return found[0] if len(found) == 1 else None


def _rebuilt_over_another(w: WatchState, keys: set[int],
                          cache: dict[int | None, set[int]]) -> int | None:
    """The one optimizer :func:`_held_elsewhere`, built again under the name of an earlier
    one (a new phase's ``es_optimizer``, rebuilt for ES-RNN's refit on the full history) that
    held the tensors whose ids are ``keys``, none of which it holds now: it was meant to hold
    them again, its argument copied from the line below it. ``None`` where there is not one."""
    found = []
    for i, opt in enumerate(w.optimizers):
        built = w.built_at.get(id(opt))
        name = w.assigned(built)
        if not name or keys & _held_by(w, i, cache) or not _held_elsewhere(w, i, cache):
            continue
        if any(w.assigned(w.built_at.get(id(w.optimizers[j]))) == name
               and keys <= _held_by(w, j, cache) for j in range(i)):
            found.append(i)
    return found[0] if len(found) == 1 else None


def _twin_held(w: WatchState, module: torch.nn.Module, keys: set[int],
               cache: dict[int | None, set[int]]) -> int | None:
    """The one optimizer that holds every tensor of ``module``'s twins (other modules of its
    class whose tensors have, in order, the shapes of its tensors whose ids are ``keys``):
    where a network left out of an optimizer belongs, beside its twin (the second of clipped
    double-Q's critics, an ensemble's member), whichever other loss also reaches it (the
    actor's, through ``min(Q1, Q2)``); ``None`` where no twin is held whole by one."""
    shapes = [p.shape for p in module.parameters() if id(p) in keys]
    found: set[int] = set()
    for network, _ in w.networks():
        for sub in network.modules():
            if sub is module or type(sub) is not type(module):
                continue
            theirs = list(sub.parameters())
            if [p.shape for p in theirs] != shapes or any(id(p) in keys for p in theirs):
                continue
            holders = {i for i in range(len(w.optimizers))
                       if all(id(p) in _held_by(w, i, cache) for p in theirs)}
            if len(holders) != 1:
                return None   # a twin no optimizer, or several, hold whole
            found |= holders
    return found.pop() if len(found) == 1 else None


def _held_by(w: WatchState, index: int | None, cache: dict[int | None, set[int]]) -> set[int]:
    """The ids of the tensors the ``index``-th optimizer holds (none for ``None``), kept in
    ``cache`` for the call that asks again."""
    if index not in cache:
        cache[index] = set() if index is None else {
            id(p) for g in w.optimizers[index].param_groups for p in g["params"]}
    return cache[index]


def _made_after(w: WatchState, index: int, tensors: list[torch.Tensor], built: Site
                ) -> int | None:
    """The line, in the scope that built the ``index``-th optimizer (at ``built``), of the last
    statement that made one of ``tensors`` after it was built, when every one of them was
    made so (their module appended by a method the script calls there); else ``None``."""
    scope = w.built_in.get(id(w.optimizers[index]))
    lines = []
    for p in tensors:
        leaf, made = w.made_leaves.get(id(p)), w.made_in.get(id(p))
        if scope is None or leaf is None or leaf[0]() is not p or made is None or \
                made[0] <= index:
            return None
        line = next((n for path, first, n in made[1] if (path, first) == scope), None)
        if line is None or line <= built.line:
            return None
        lines.append(line)
    return max(lines) if lines else None


def _stepped_after_alone(w: WatchState, sources: set, stepped: set[int]) -> int | None:
    """The optimizer stepped first after the last of the backwards ``sources``, where
    each of them wrote only tensors of the networks the script calls and none that an optimizer
    holds (the loss trains nothing); else ``None``."""
    wrote = set().union(*(s.wrote for s in sources))
    if not wrote or wrote & stepped or any(s.index < 0 for s in sources):
        return None
    if any(w.owner(k) is None for k in wrote):
        return None   # an input's gradient (an attack's, a sampler's) is what it is for
    last = max(s.index for s in sources)
    after = [e for e in w.step_optimizer if e > last]
    if not after:
        return None
    index = w.step_optimizer[min(after)]
    params = [p for g in w.optimizers[index].param_groups for p in g["params"]]
    held = {id(p) for p in params}
    # one built since over these tensors (a new round's) steps them; one whose own tensors
    # the script froze since they trained (dataset condensation's synthetic images, left
    # frozen after an evaluation) is what the loss was for: the freeze is the finding
    if any(not p.requires_grad and id(p) in w.trainable_by.get(index, ()) for p in params):
        return None
    return None if wrote & held else index


def _rebound(w: WatchState) -> set[int]:
    """Indices of the optimizers the script can no longer step: the name it assigned one to
    (``optimizer = torch.optim.Adam(...)``) holds another optimizer now (a phase that builds
    its own, IRM's Adam reset once the penalty is annealed). What only such an optimizer
    holds is stepped by none."""
    out = set()
    for index, opt in enumerate(w.optimizers):
        built = w.built_at.get(id(opt))
        name = w.assigned(built)
        now = w.scope.get(name) if name and name.isidentifier() else None
        if isinstance(now, torch.optim.Optimizer) and now is not opt:
            out.add(index)
    return out


def _held_by_unused(w: WatchState) -> None:
    """Tensors a loss's gradient reached, left in ``.grad`` at the end of an iteration, that no
    optimizer which ever stepped holds, and that optimizers built but never stepped do: noted
    by the first such optimizer for :func:`never_stepped`."""
    if all(i in w.optimizer_stepped or i in w.unused_optimizers
           for i in range(len(w.optimizers))):
        return   # every optimizer stepped, or is noted already (the common case)
    stepping = {id(p) for i, o in enumerate(w.optimizers) if i in w.optimizer_stepped
                for g in o.param_groups for p in g["params"]}
    idle = {id(p): i for i, o in enumerate(w.optimizers) if i not in w.optimizer_stepped
            and i not in w.unused_optimizers for g in o.param_groups for p in g["params"]}
    found: dict[int, list[int]] = {}
    for key, live in w.ledger.live.items():
        if live and key not in stepping and key in idle:
            found.setdefault(idle[key], []).append(key)
    for index, keys in found.items():
        at = tuple(sorted({s.site for k in keys for s in w.ledger.live[k]
                           if s.site is not None}, key=lambda s: (s.path, s.line)))
        w.unused_optimizers[index] = (w.iteration, w.step_events - 1, keys, at)


def never_stepped(w: WatchState) -> None:
    """At the end of a run that ended by itself: each optimizer built over tensors a loss
    trains (its gradient left in them at an iteration's end, no optimizer that steps holding
    them) that never stepped in the whole run is a failure at the line that builds it: the
    step the script takes is another optimizer's (a new generation's optimizer built and
    never handed to the code that steps, nocotan/born_again_neuralnet's ``train.py``). No
    edit, where which optimizer the loop should step only the script says; but where the
    loop clears it beside the ``backward()`` and steps another there (an encoder's and a
    decoder's optimizers, the encoder's step left out), the step left out is inserted after
    that other step (:func:`~toolkit.audit.record.syntax.step_left_out`)."""
    if w.stopped:
        return
    names = w.names()
    seen: set = set()
    for index, (iteration, step, keys, at) in sorted(w.unused_optimizers.items()):
        opt = w.optimizers[index]
        built = w.built_at.get(id(opt))
        # one finding per line that builds them (a new one for each generation, each phase)
        if index in w.optimizer_stepped or (built is not None and built in seen):
            continue
        seen.add(built)
        opt_name = w.assigned(built)
        shown = tuple(names.get(k, "?") for k in keys)
        called = f"`{opt_name}`" if opt_name else "the optimizer"
        edits: tuple = ()
        if opt_name and opt_name.isidentifier() and len(at) == 1:
            after = S.step_left_out(at[0].path, at[0].line, opt_name)
            edit = w.fixes.insert_after(at[0].path, after, f"{opt_name}.step()") \
                if after is not None else None
            edits = (edit,) if edit is not None else ()
        w.add(ScriptFinding(
            "unstepped", iteration,
            f"{plural(len(keys), 'tensor')} get gradient that no step uses: only {called} "
            f"holds them, and it never steps in the whole run (the loop steps another "
            f"optimizer)", shown, shown,
            ((built.shown(),) if built is not None else ()) + tuple(s.shown() for s in at),
            edits, advice=f"step {called} where the loss's backward() is, or hand it to the "
                          f"code that steps", step=step, concerned=shown))


def _widened(fixes: FixWriter, opt: torch.optim.Optimizer, module: nn.Module, name: str,
             keys: set[int], built: Site):
    """The optimizer built over one part of ``module`` (``get_params_groups(student.backbone)``)
    where the loss trains the rest of it, ``keys``, too: that part, as the line writes it,
    replaced by the module (``student``), so that whatever the line builds from it (groups,
    weight decay, learning rates) holds all of it, as the published line does. ``None`` when
    the optimizer's share of ``module`` is no one submodule or the line does not write it."""
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    every = {id(p) for p in module.parameters()}
    if not every <= held | keys:
        return None
    share = held & every
    for sub_name, sub in module.named_modules():
        if sub_name and {id(p) for p in sub.parameters()} == share:
            return fixes.widen(built.path, built.line, f"{name}{S.attribute_path(sub_name)}", name)
    return None


def _parameters_text(module: nn.Module, name: str, keys: set[int]) -> str:
    """The parameters of ``module`` (called ``name`` in the user's code) whose ids are
    ``keys``, as the user would write them: ``name.parameters()`` when they are all of it, the
    largest submodules they fill whole (``[*model.fc22.parameters()]``), else each one
    (``model.fc22.weight``); a numbered child is indexed (``net[0]``)."""
    every = {id(p) for p in module.parameters()}
    if every and every <= keys:
        return f"{name}.parameters()"
    parts, covered = [], set()
    for sub_name, sub in module.named_modules():
        ids = {id(p) for p in sub.parameters()}
        if sub_name and ids and ids <= keys and not ids <= covered:
            parts.append(f"*{name}{S.attribute_path(sub_name)}.parameters()")
            covered |= ids
    for p_name, p in module.named_parameters():
        if id(p) in keys and id(p) not in covered:
            parts.append(f"{name}{S.attribute_path(p_name)}")
    if len(parts) == 1 and parts[0].startswith("*"):
        return parts[0][1:]
    return "[" + ", ".join(parts) + "]"
