"""At the end of an audited iteration: gradient in tensors no optimizer steps, between a loss
and stepped tensors or part of a model whose other tensors are stepped (``unstepped``, with
the parameter group that adds them), or elsewhere (``wasted``, a note).

- A learned tensor made a plain tensor: a leaf that requires grad and is no ``Parameter``
  (``torch.empty(n, requires_grad=True)``), held as an attribute of a module of a network an
  optimizer steps, reached by a loss, held by no optimizer and not moved by the script itself
  (a perturbation it steps by hand) is unstepped: the network's ``parameters()`` do not hold
  it. The failure is at the line that makes it; its edit makes it a ``Parameter`` there, in
  the file's own spelling (``nn.Parameter(torch.empty(n))``), so that the optimizer built from
  ``parameters()`` steps it. A perturbation of the input made to require grad (FGSM) is held
  by no module; a tensor an optimizer built over a list holds is stepped: no finding.
- The group an edit adds follows the no-decay convention where the script does: when the
  tensors are all of one dimension or fewer (biases, norm weights, a temperature) and the
  optimizer has weight decay but decays none such, the group is ``{"params": [...],
  "weight_decay": 0.0}``, as nanoGPT's ``configure_optimizers``
  (https://github.com/karpathy/nanoGPT/blob/master/model.py), minGPT's and timm's
  ``param_groups_weight_decay`` (https://github.com/huggingface/pytorch-image-models,
  timm/optim/_param_groups.py) build it."""

from __future__ import annotations

import ast
import inspect
import os

import torch
from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site, is_user
from toolkit.audit.record.sites import Line
from toolkit.audit.record.unregistered import KeptIn, unregistered
from toolkit.audit.result import plural
from toolkit.audit.rules.running import copies
from toolkit.audit.rules.running.fix_writer import FixWriter
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
    stepped = {k: i for k, i in held.items() if i not in gone}
    _held_by_unused(w)
    replacing = replaced(w, stepped)
    _free_parameters(w, stepped)
    _plain_tensors(w, stepped)
    # the last gradient of an earlier loop, which its own optimizer stepped
    holding: dict[int | None, set[int]] = {}
    done = {key for key, live in w.ledger.live.items()
            if live and key not in stepped and held.get(key) in earlier and all(
                s.step is not None and key in _held_by(w, w.step_optimizer.get(s.step),
                                                        holding) for s in live)}
    replacing |= _in_plain_containers(w, stepped.keys() | done)
    names = w.names()
    by_root: dict[int, list[int]] = {}
    for key, live in w.ledger.live.items():
        if key in stepped or not live or key in replacing or key in done:
            continue
        owner = w.owner(key)
        if owner is None:
            continue
        by_root.setdefault(id(owner), []).append(key)
    for module, name, keys in _wholes(w, by_root, stepped):
        trained = any(id(p) in stepped for p in module.parameters())
        inside = [k for k in keys if k in w.between]
        srcs = {s for k in keys for s in w.ledger.live[k] if s.site is not None}
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
        elif (twin := _copied_over(w, module, set(keys), holding)) is not None:
            opts = [twin]
        elif inside and (twin := _twin_held(w, module, set(keys), holding)) is not None:
            opts = [twin]
        opt = w.optimizers[opts[0]] if opts else None
        built = w.built_at.get(id(opt)) if opt is not None else None
        edits: tuple = ()
        opt_name = w.assigned(built)
        extra_concerned: tuple[str, ...] = ()
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
            e = w.fixes.replace_parameters(built.path, built.line,
                                     _parameters_text(module, name, set(keys)))
            if e is not None:
                edits = (e,)
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
        elif built is not None and opt_name:
            added = [p for p in module.parameters() if id(p) in set(keys)]
            # made after the optimizer was built (a head a method appends for a new task):
            # the group is added after the statement that made them, where they exist
            later = _made_after(w, opts[0], added, built)
            e = _widened(w.fixes, opt, module, name, set(keys), built) if later is None \
                else None
            if e is None:
                params = _parameters_text(module, name, set(keys))
                e = w.fixes.insert_after(built.path, later or built.line,
                                   f"{opt_name}.add_param_group({_group(w, opt, params, added)})")
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
                    f"build {('`' + opt_name + '`') if opt_name else 'it'} over "
                    f"{_parameters_text(module, name, set(keys))}" if (copied or idle) and edits
                    else
                    f"add them to {('`' + opt_name + '`') if opt_name else 'the optimizer'}"
                    f" (optimizer.add_param_group({{'params': [...]}}), or in its "
                    f"constructor)"), step=w.step_events - 1,
            concerned=tuple(shown) + extra_concerned))


def _built_sites(built: Site | None) -> tuple[str, ...]:
    """The optimizer's line, and the line that made the list it was built over where the
    line hands a name (``encoder_params = [*encoder.parameters(), *mu_head.parameters()]``
    before ``RMSprop(encoder_params)``): the fix is as right in either."""
    if built is None:
        return ()
    made = S.argument_made_at(built.path, built.span)
    return (built.shown(), *(() if made is None else (Site(built.path, made, None).shown(),)))


def _claimed(w: WatchState, wrong: int) -> tuple[str, ...]:
    """The misplaced ``wrong``-th optimizer's own tensors, which this finding is about too:
    its dead finding, waiting, is this one's."""
    w.pending_dead = [(f, v) for f, v in w.pending_dead if f.extra.get("misplaced") != wrong]
    return w.misplaced[wrong][1]


def _wholes(w: WatchState, by_root: dict[int, list[int]],
            stepped: dict[int, int]) -> list[tuple[nn.Module, str, list[int]]]:
    """Each called network with its tensors no optimizer steps (``by_root``), parts of one
    network the script names, no tensor of which an optimizer steps, taken together as that
    network (an actor called through its methods, whose body and heads are what it calls:
    ``actor``, not ``self.body``, ``self.mean`` and ``self.log_std``)."""
    named = w._held_by_names()
    out: dict[int, tuple[nn.Module, str, list[int]]] = {}
    for root, keys in by_root.items():
        module, name = w.roots[root]
        whole = next(((m, n) for m, n in named if m is not module and any(
            x is module for x in m.modules()) and not any(
            id(p) in stepped for p in m.parameters())), None)
        if whole is not None:
            module, name = whole
        out.setdefault(id(module), (module, name, []))[2].extend(keys)
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


def _group(w: WatchState, opt: torch.optim.Optimizer, params: str,
           added: list[torch.Tensor]) -> str:
    """The parameter group an edit adds to ``opt``: ``{"params": params}``, with the settings
    of its first group as built whose tensors are all of the added ones' kind (of one
    dimension or fewer: biases and norms; or of two or more: weights), where the script gave
    that group settings of its own (I-JEPA's no-decay groups, ``{"WD_exclude": True,
    "weight_decay": 0}``, which its schedule leaves alone); else with ``"weight_decay": 0.0``
    when the tensors ``added`` are all of one dimension or fewer and ``opt`` has weight decay
    but decays no such tensor (the no-decay group the script left out: see the module's
    docstring)."""
    low, high = all(t.ndim <= 1 for t in added), all(t.ndim >= 2 for t in added)
    for dims, settings in w.built_groups.get(id(opt), []):
        if dims and ((low and max(dims) <= 1) or (high and min(dims) >= 2)):
            own = {k: v for k, v in settings.items() if type(v) in (bool, int, float, str)
                   and (k not in opt.defaults or opt.defaults[k] != v)}
            if own:
                return "{" + ", ".join([f'"params": {params}',
                                        *(f"{k!r}: {v!r}" for k, v in own.items())]) + "}"
            break
    decayed = [p for g in opt.param_groups if g.get("weight_decay") for p in g["params"]]
    if added and all(t.ndim <= 1 for t in added) and opt.defaults.get("weight_decay") and \
            not any(p.ndim <= 1 for p in decayed):
        return f'{{"params": {params}, "weight_decay": 0.0}}'
    return f'{{"params": {params}}}'


def _free_parameters(w: WatchState, stepped: dict[int, int]) -> None:
    """A parameter of no module (``log_z = nn.Parameter(torch.zeros(1))``, a GFlowNet's
    partition function; a learned temperature) that a loss trains in a term of its own beside
    terms that train stepped tensors, held by no optimizer and not moved by the script itself:
    unstepped, a failure at the line that builds the optimizer of those terms, with the
    parameter group that adds it (its learning rate is the optimizer's: the script may want
    its own, as trajectory balance's does)."""
    held_in: dict[str, list[torch.Tensor]] = {}
    for key, (tensor, before) in w.plain_values.items():
        # or a plain leaf the script keeps across iterations (MPO's Lagrange multipliers,
        # ``torch.full(..., requires_grad=True)``), not one made afresh for each (a gradient
        # penalty's interpolates)
        kept = tensor.is_leaf and tensor.requires_grad and \
            w.reached_in.get(key, (0, 0))[1] > w.reached_in.get(key, (0, 0))[0]
        if not (isinstance(tensor, nn.Parameter) or kept) or key in stepped or \
                not w.between.get(key) or not w.ledger.live.get(key) or \
                w.owner(key) is not None or not torch.equal(before, tensor.detach()):
            continue
        name = w.bound_name(tensor)
        if name is not None and key in w.beside:
            _report_free(w, name, f"[{name}]", [tensor])
        elif name is None and key not in w.beside and \
                (holder := _container_of(w, tensor)) is not None:
            # held by a module the script never calls, between the loss and stepped tensors
            # (Meta-SGD's learned learning rates in an ``nn.ParameterList``, scaling the
            # inner step of the parameters the outer loss trains): one finding for the
            # container
            held_in.setdefault(holder, []).append(tensor)
    for name, tensors in held_in.items():
        _report_free(w, name, f"list({name}.parameters())", tensors)


def _container_of(w: WatchState, tensor: torch.Tensor) -> str | None:
    """The name the script's frames hold a module by that holds ``tensor`` and that the
    script never calls (a ``ParameterList``), or ``None``."""
    for name, value in w.scope.items():
        if isinstance(value, nn.Module) and not name.startswith("_") and \
                any(p is tensor for p in value.parameters()):
            return name
    return None


def _report_free(w: WatchState, name: str, params: str, tensors: list[torch.Tensor]) -> None:
    """The ``unstepped`` finding of :func:`_free_parameters`: ``name`` (the one tensor's, or the
    container's of ``tensors``) added to the optimizer of its siblings' terms as ``params``."""
    key = id(tensors[0])
    # the optimizer of the term's siblings: one that holds parameters of no module as
    # this is (MPO's dual optimizer, beside the policy's), else the first
    plain = [i for i in sorted(w.between[key]) if all(
        w.owner(id(p)) is None for g in w.optimizers[i].param_groups for p in g["params"])]
    opt = w.optimizers[(plain or sorted(w.between[key]))[0]]
    built = w.built_at.get(id(opt))
    opt_name = w.assigned(built)
    edits: tuple = ()
    if built is not None and opt_name:
        e = w.fixes.insert_after(built.path, built.line, f"{opt_name}.add_param_group("
                                 f"{_group(w, opt, params, tensors)})")
        edits = (e,) if e is not None else ()
    srcs = {s.site.shown() for s in w.ledger.live[key] if s.site is not None}
    w.add(ScriptFinding(
        "unstepped", w.iteration,
        f"`{name}` gets gradient and no optimizer steps it, though the same loss trains "
        + ("through it tensors an optimizer steps" if tensors[1:] or key not in w.beside else
           "in terms beside its own tensors an optimizer steps"),
        (name,), (name,), ((built.shown(),) if built is not None else ()) + tuple(
            sorted(srcs)), edits,
        advice=f"add it to {('`' + opt_name + '`') if opt_name else 'the optimizer'}"
               f" (optimizer.add_param_group({{'params': {params}}}), with its own "
               f"learning rate if the method gives it one)", step=w.step_events - 1,
        concerned=(name,)))


def _plain_tensors(w: WatchState, stepped: dict[int, int]) -> None:
    """Learned tensors made plain tensors (see the module's docstring): per network, a failure
    at the lines that make them, with the edits that make them parameters there, or, where
    a line is not found, the parameter group that adds them to the network's optimizer."""
    seen, w.plain_values = w.plain_values, {}
    found: dict[int, list[tuple[int, torch.Tensor, str, nn.Module, str]]] = {}
    networks: dict[int, tuple[nn.Module, str]] = {}
    for key, (tensor, before) in seen.items():
        if key in stepped or not w.ledger.live.get(key) or not tensor.is_leaf or \
                not tensor.requires_grad or not torch.equal(before, tensor.detach()):
            continue   # stepped, its gradient not there, or moved by the script itself
        held = next((k for k in w.kept_plainly() if k.value is tensor and not k.item), None)
        if held is None:
            continue
        network, root, path, module, attr = held[:5]
        if not any(id(p) in stepped for p in network.parameters()):
            continue
        networks[id(network)] = (network, root)
        found.setdefault(id(network), []).append((key, tensor, path, module, attr))
    for net_id, tensors in found.items():
        network, root = networks[net_id]
        rank = {id(m): i for i, m in enumerate(network.modules())}
        tensors.sort(key=lambda x: (rank.get(id(x[3]), len(rank)), x[4]))
        index = min(stepped[id(p)] for p in network.parameters() if id(p) in stepped)
        opt = w.optimizers[index]
        built = w.built_at.get(id(opt))
        shown = tuple(f"{root}.{path}" for _, _, path, _, _ in tensors)
        made = [_made_at(type(module), attr) for _, _, _, module, attr in tensors]
        places = sorted((m for m in dict.fromkeys(made) if m is not None),
                        key=lambda m: (m[0], m[1].lineno))
        edits: list = []
        at: list[str] = []
        if None not in made:
            for m in places:
                edit = w.fixes.as_parameter(m[0], m[1], m[2])
                if edit is None:
                    edits = []
                    break
                edits.append(edit)
                at.append(Site(m[0], m[1].lineno, None).shown())
        opt_name = w.assigned(built)
        concerned: tuple[str, ...] = shown
        step = w.step_events - 1
        if not edits:
            at = [built.shown()] if built is not None else []
            if built is not None and opt_name:
                params = "[" + ", ".join(f"{root}{S.attribute_path(path)}"
                                         for _, _, path, _, _ in tensors) + "]"
                group = _group(w, opt, params, [t for _, t, _, _, _ in tensors])
                e = w.fixes.insert_after(built.path, built.line,
                                   f"{opt_name}.add_param_group({group})")
                edits = [e] if e is not None else []
        else:
            # the edit puts them in the network's parameters, among the tensors the
            # optimizer holds: from its first step the positions of those tensors move
            concerned = ("*",)
            step = next((i for i, e in enumerate(sorted(w.step_optimizer))
                          if w.step_optimizer[e] == index), w.step_events - 1)
        srcs = {s for k, _, _, _, _ in tensors for s in w.ledger.live[k] if s.site is not None}
        at += sorted({s.site.shown() for s in srcs})
        holders = sorted({type(m).__name__ for _, _, _, m, _ in tensors})
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{len(tensors)} tensors of {root} get gradient and no optimizer steps them: "
            f"{', '.join(holders)} holds them as plain tensors that require grad, not as "
            f"nn.Parameter, so {root}.parameters() does not hold them, though an optimizer "
            f"steps the rest of {root}",
            shown, shown, tuple(at), tuple(edits),
            advice="make them parameters where they are made (nn.Parameter(...)), or add them "
                   f"to {('`' + opt_name + '`') if opt_name else 'the optimizer'}",
            step=step, concerned=concerned))


def _in_plain_containers(w: WatchState, stepped: set[int]) -> set[int]:
    """Learned tensors a module of the model keeps in a plain ``list`` or ``dict`` (or modules
    kept so), which torch does not register: the loss trains them, and the optimizer built
    from ``model.parameters()`` never holds them (a hypernetwork's layer embeddings appended
    to ``self.z_list = []``). A failure at the line that keeps them and the optimizer's, whose
    edit registers the container where it is made (``torch.nn.ParameterList([])``), as the
    step audit writes it (:func:`~toolkit.audit.record.unregistered.unregistered`)."""
    unstepped = [k for k, live in w.ledger.live.items()
                 if live and k not in stepped and k in w.ledger.tensors
                 and w.ledger.tensors[k].is_leaf]
    # tensors of no module the script calls, then those of modules it calls itself that the
    # model keeps in a plain container (bootstrapped DQN's heads in a list, each called)
    for keys in ([k for k in unstepped if w.owner(k) is None],
                 [k for k in unstepped if w.owner(k) is not None]):
        if keys and _report_container(w, [w.ledger.tensors[k] for k in keys]):
            return set(keys)
    return set()


def _report_container(w: WatchState, joining: list[torch.Tensor]) -> bool:
    """The failure of :func:`_in_plain_containers` for the tensors ``joining``, when an
    optimizer's model keeps every one of them in plain containers; whether it was made."""
    names = w.names()
    for index, opt in enumerate(w.optimizers):
        built = w.built_at.get(id(opt))
        if built is None:
            continue
        line = Line(os.path.basename(built.path), built.line, "", built.text(), built.path)
        found = unregistered(opt, line, w.built_scope.get(id(opt), {}), None, joining)
        if found is None or not all(isinstance(f, KeptIn) and f.kind != "Parameter"
                                    for f in found.found):
            continue
        edits = w.fixes.registered(found).edits
        keys = tuple(f"{found.model}:{i}" for i in range(len(joining)))
        srcs = {s for t in joining for s in w.ledger.live[id(t)] if s.site is not None}
        at = (*(str(x) for x in found.lines), built.shown(),
              *sorted({s.site.shown() for s in srcs}))
        shown = tuple(dict.fromkeys(found.kept))
        wanted = {id(t) for t in joining}
        named: dict[int, str] = {}
        for kept in w.kept_plainly():
            if kept.item and id(kept.value) in wanted and not kept.attr.startswith("_"):
                named.setdefault(id(kept.value), kept.name)
        # a module kept in the container: its tensors by the container's name
        # (``policy_net.net_list.0.fc1.weight``), not the name the code calls it by
        in_module: dict[int, str] = {}
        for place in found.found:
            items = place.value.items() if isinstance(place.value, dict) else \
                enumerate(place.value) if isinstance(place.value, (list, tuple)) else ()
            for i, item in items:
                if isinstance(item, nn.Module):
                    for p_name, p in item.named_parameters():
                        if id(p) in wanted:
                            in_module.setdefault(id(p), f"{place.label}.{i}.{p_name}")
        order = {k: n for n, k in enumerate(in_module)}   # as the container holds them
        joining = sorted(joining, key=lambda t: order.get(id(t), len(order)))
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{plural(len(joining), 'tensor')} the loss trains, kept in "
            f"{', '.join(shown)} (a plain container torch does not register), are in no "
            f"optimizer: {w.optimizer_text(index, built) or 'the optimizer'} steps "
            f"{found.model}.parameters(), which never holds them",
            keys, tuple(in_module.get(id(t)) or names.get(id(t), named.get(id(t), shown[0]))
                        for t in joining), at, edits,
            advice=f"register {', '.join(shown)} where it is made (torch.nn.ParameterList, "
                   f"torch.nn.ModuleList), or requires_grad_(False) if it is meant to stay "
                   f"fixed", step=w.step_events - 1, concerned=("*",)))
        return True
    return False


def _made_at(cls: type, attr: str) -> tuple[str, ast.expr, str] | None:
    """Where the user's class ``cls`` (or a class of the user's it derives from) makes its
    attribute ``attr`` (``self.bias = torch.empty(n, requires_grad=True)`` in a method): the
    file, the assigned expression and how that file spells ``nn.Parameter``; ``None`` when
    it is not one such assignment, or the file imports no name for ``Parameter``."""
    for klass in cls.__mro__:
        if klass in (nn.Module, object):
            break
        try:
            path = inspect.getsourcefile(klass)
        except (TypeError, OSError):
            continue
        if path is None or not is_user(path):
            continue
        parsed = S.syntax_tree(path)
        if parsed is None:
            continue
        tree, text = parsed
        values = [v for node in ast.walk(tree)
                  if isinstance(node, ast.ClassDef) and node.name == klass.__name__
                  for v in _assigned(node, attr)]
        # the one that makes it require grad, where the class assigns it more than once
        made = [v for v in values if "requires_grad" in S.segment(text, v)] or values[:1]
        spelled = _parameter_name(tree)
        if len(made) == 1 and spelled is not None:
            return path, made[0], spelled
        return None
    return None


def _assigned(node: ast.ClassDef, attr: str) -> list[ast.expr]:
    """The expressions the methods of ``node`` assign to ``self.attr``."""
    out = []
    for method in node.body:
        if not isinstance(method, ast.FunctionDef) or not method.args.args:
            continue
        me = method.args.args[0].arg
        for st in ast.walk(method):
            targets = st.targets if isinstance(st, ast.Assign) else [
                st.target] if isinstance(st, ast.AnnAssign) and st.value is not None else []
            if any(isinstance(t, ast.Attribute) and t.attr == attr
                   and isinstance(t.value, ast.Name) and t.value.id == me for t in targets):
                out.append(st.value)
    return [v for v in out if v is not None]


def _parameter_name(tree: ast.Module) -> str | None:
    """How a file spells ``torch.nn.Parameter`` by its top-level imports: ``Parameter``
    (imported by name), ``nn.Parameter`` (``from torch import nn``), ``torch.nn.Parameter``."""
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in ("torch.nn", "torch.nn.parameter"):
            for a in node.names:
                if a.name == "Parameter":
                    names.setdefault(0, a.asname or a.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch":
            for a in node.names:
                if a.name == "nn":
                    names.setdefault(1, f"{a.asname or a.name}.Parameter")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch.nn" and a.asname:
                    names.setdefault(1, f"{a.asname}.Parameter")
                elif a.name in ("torch", "torch.nn") and (a.asname is None or a.name == "torch"):
                    names.setdefault(2, f"{a.asname or 'torch'}.nn.Parameter")
    return names[min(names)] if names else None
