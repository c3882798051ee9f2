"""What a step finds in ``.grad``, in an audited iteration: gradient of another step's loss
(``leak``), of an earlier iteration's, or of weights the script has moved since (``stale``), a
tensor two optimizers step (``shared``), gradient cleared before any step or the script's code
used it (``wasted``), and a network frozen for another's step and never switched back on
(``frozen``)."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Sequence

import torch
import torch.overrides

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.calls import holders
from toolkit.audit.record.frames import Site, is_user
from toolkit.audit.record.ledger import Source
from toolkit.audit.record.tensors import keyed, nonzero
from toolkit.audit.result import plural
from toolkit.audit.rules.running import cut_terms, leak_cause
from toolkit.audit.rules.running.state import WatchState

__all__ = ["for_an_input", "frozen", "leaks", "moved", "settle", "shared", "wasted"]


def leaks(w: WatchState, index: int, event: int, site: Site | None, stepped) -> None:
    foreign: dict[Source, list[tuple[str, torch.Tensor]]] = {}
    own: list[Source] = []
    apart = _kept_apart(w, stepped)
    # each tensor it wrote, those whose sum with the step's own gradient is zero too
    # (``-loss`` beside ``loss``: the ledger reads a zero .grad as cleared)
    foreign.update({src: [(k, p) for k, p in stepped if id(p) in src.wrote] for src in apart})
    for key, p in stepped:
        for src in w.ledger.live.get(id(p), []):
            if src in apart:
                continue
            if src.step is None:
                src.step = event
            if src.step == event:
                if src not in own:
                    own.append(src)
            else:
                foreign.setdefault(src, []).append((key, p))
    if not own:
        # one loss of this iteration whose gradient another optimizer stepped first, and
        # nothing else in .grad: the loss trains both (an encoder and a decoder, each with
        # its optimizer); a leak mixes another loss's gradient into a step's own. That loss
        # is this step's own, where an edit clears what came before it
        own = [src for src in foreign if src.index >= 0 and src.iteration == w.iteration
               and w.step_optimizer.get(src.step) != index]
        foreign = {src: hit for src, hit in foreign.items() if src not in own}
    # a loss of this iteration that reaches them through a value the script cut at another
    # read (PEARL's critic loss, reading whole the task variable the policy reads cut): the
    # script chose where to cut, and this loss trains them as the step's own does
    foreign = {src: hit for src, hit in foreign.items() if not (
        own and src.iteration == w.iteration and src.index > min(s.index for s in own)
        and all(id(p) in src.uncut for _, p in hit))}
    if not foreign:
        return
    names = w.names()
    opt_text = w.optimizer_text(index, site)   # the source read only for a finding
    first_own = min(own, key=lambda s: s.index) if own else None
    for src, hit in foreign.items():
        kind = "leak" if src.iteration == w.iteration and src.index >= 0 else "stale"
        what = (f"the gradient of {src.label} (backward at {src.site}) is in .grad of "
                f"{len(hit)} tensors when {opt_text or 'the optimizer'} steps"
                if kind == "leak" else
                f"{len(hit)} tensors still hold gradient of an earlier iteration "
                f"({src.label if src.index >= 0 else 'no zero_grad() cleared it'}) when "
                f"{opt_text or 'the optimizer'} steps: it is added to this step's")
        at = tuple(s.shown() for s in (src.site, site) if s is not None)
        edits: tuple = ()
        inner = False
        # the loss's path into them cut where their output is made, or the clear
        cause = leak_cause.cut_at_cause(w, src, {id(p) for _, p in hit}) \
            if src.index >= 0 and src not in apart else None
        wrong = _clear_of_frozen(w, src, opt_text) if cause is None and opt_text else None
        kept = _own_inputs(w, src, index) if src in apart else None
        if kept is not None:
            edits = (kept,)
        elif cause is not None:
            at, edits = (cause[0].shown(), *at), (cause[1],)
        elif wrong is not None:
            at, edits = (wrong[0].shown(), *at), (wrong[1],)
        elif opt_text and first_own is not None and first_own.site is not None:
            clear, own_site = f"{opt_text.strip('`')}.zero_grad()", first_own.site
            # a backward inside a loop the step is not in (over micro-batches: gradient
            # accumulation) is cleared after the step, where a window ends, not at each pass
            inner = site is not None and site.path == own_site.path and S.loop_beside(
                site.path, own_site.line, site.line) is not None
            e = w.fixes.insert_after(site.path, site.line, clear) if inner and site else \
                w.fixes.insert_before(own_site.path, own_site.line, clear)
            edits = (e,) if e is not None else ()
        # tensors no backward of this step's own wrote (a policy's, held by the model's
        # optimizer, stale from the policy's update): the clear leaves them no gradient
        mine = {k for s in own for k in s.wrote}
        w.add(ScriptFinding(
            kind, w.iteration, what + " (it changes the update)",
            tuple(k for k, _ in hit), tuple(names.get(id(p), k) for k, p in hit), at,
            edits, advice=("take that backward over its own optimizer's tensors alone "
                           "(backward(inputs=...)), as the script does for the loss beside it"
                           if src in apart else
                           f"cut that loss's path into them where it is made ({cause[0]})"
                           if cause is not None else
                           f"clear {opt_text} where {wrong[0]} clears an optimizer over "
                           f"frozen tensors" if wrong is not None else
                           f"call {(opt_text or 'the optimizer').strip('`')}.zero_grad() "
                           + ("after this step (its backward() calls are a loop's, whose "
                              "window the step ends)" if inner else
                              "before this step's own backward()")), step=w.step_events - 1,
            concerned=tuple(k for k, _ in hit), cost_bytes=_bytes([p for _, p in hit]),
            extra={"loses": True} if not any(id(p) in mine for _, p in hit) else {}))


def _kept_apart(w: WatchState, stepped) -> set[Source]:
    """The backward() calls of this iteration, not paired with a step yet, that wrote into this
    step's tensors against one the script kept to them: a loss whose ``backward(inputs=...)``
    wrote only this step's tensors and left out others it reaches, where the first wrote into
    no tensor but this step's and those, its graph shares a node of the first's that carries
    gradient into this step's tensors (one objective, differentiated twice), and its gradient
    on them opposes the first's (a negative inner product). Two players of one objective,
    each differentiated with respect to its own network's variables alone (ValueDICE's
    ``nu_loss.backward(inputs=nu)`` and ``pi_loss.backward()`` of ``pi_loss = -loss``, before
    either optimizer steps, Kostrikov et al. 2020): the second's gradient belongs to the
    tensors the script kept the first from, and what it adds to this step's undoes the
    first's. A loss that trains both networks beside one kept to one (a reconstruction beside
    a decoder's own term, each with its own call of the decoder) meets it nowhere, or pulls
    the same way."""
    mine = {id(p): p for _, p in stepped}
    live = list(dict.fromkeys(s for k in mine for s in w.ledger.live.get(k, [])
                              if s.index >= 0 and s.iteration == w.iteration))
    kept = [s for s in live if s.kept_out and s.added and s.wrote <= mine.keys()]
    if not kept:
        return set()
    kept_out = set().union(*(s.kept_out for s in kept))
    found = set()
    for src in live:
        if src.step is not None or src.kept_out or not src.wrote - mine.keys() or \
                not src.wrote - mine.keys() <= kept_out or not any(s in kept for s in src.meets):
            continue
        dot = 0.0
        for k in src.wrote & mine.keys():
            others = [s for s in w.ledger.live.get(k, []) if s is not src]
            grad = mine[k].grad
            if grad is None or any(s not in kept or k not in s.added for s in others):
                continue
            theirs = sum(s.added[k] for s in others)
            if isinstance(theirs, torch.Tensor) and theirs.shape == grad.shape:
                dot += float(((grad - theirs) * theirs).sum())
        if dot < 0:
            found.add(src)
    return found


def _own_inputs(w: WatchState, src: Source, index: int):
    """The edit that gives ``src``'s backward ``inputs=`` the tensors of the one optimizer (not
    ``index``) holding the rest of what it wrote, as the script built that optimizer over them;
    ``None`` where no one optimizer holds them or the script cannot name them at that
    backward."""
    held = w.stepped_map()
    others = {held.get(k) for k in src.wrote if held.get(k) != index}
    built = w.built_at.get(id(w.optimizers[others.pop()])) if len(others) == 1 and \
        None not in others else None
    if built is None or src.site is None or built.path != src.site.path:
        return None
    text = S.params_in_scope((built.path, built.span), src.site.line)
    return w.fixes.backward_inputs(src.site.path, src.site.line, f"*{text}") \
        if text is not None else None


def _clear_of_frozen(w: WatchState, src: Source, opt_text: str):
    """A ``zero_grad()`` the script called since ``src``'s backward on an optimizer whose
    tensors are all frozen (``den_optimizer.zero_grad()`` in a phase that trains the generator
    beside the frozen denoiser): it clears nothing, and the optimizer whose gradient piles up
    (``opt_text``) is the one it was meant for. Its site, and the edit that names that one
    instead; ``None`` where there is none."""
    name = opt_text.strip("`")
    if not name.isidentifier():
        return None
    tensors = {id(p): p for o in w.optimizers for g in o.param_groups for p in g["params"]}
    for site, keys, event in reversed(w.clears):
        if event <= src.index or not keys or any(
                k not in tensors or tensors[k].requires_grad for k in keys):
            continue
        found = S.call_at(site.path, site.span) if site.path else None
        func = found[0].func if found is not None else None
        if isinstance(func, ast.Attribute) and func.attr == "zero_grad" and \
                isinstance(func.value, ast.Name) and func.value.id != name:
            return site, w.fixes.node_edit(site.path, func.value, name)
    return None


def for_an_input(w: WatchState, index: int, site: Site | None, stepped) -> None:
    """A backward taken for an input's gradient (a Langevin sampler's step, an attack's
    perturbation: the script reads that input's ``.grad``), or for a computed value's, kept
    by ``retain_grad()`` (LEO's latent codes, adapted by their gradient), that also wrote into
    tensors this step uses, beside a backward of the iteration that trains them: the step adds
    the sampler's gradient to the loss's (``leak``). The edit cuts it at its cause: that backward
    given ``inputs=`` its input, so that it writes no other ``.grad``. Where the script froze
    the rest of the same network for it (``f.f.requires_grad_(False)`` for
    ``f.requires_grad_(False)``), the finding names that freeze too."""
    if not w.input_reads and not w.retained_reads:
        return
    held = set(w.stepped_map())
    mine: dict[Source, list[tuple[str, torch.Tensor]]] = {}
    for key, p in stepped:
        for src in w.ledger.live.get(id(p), []):
            if src.index >= 0 and src.iteration == w.iteration:
                mine.setdefault(src, []).append((key, p))

    def read_after(src: Source) -> list[str]:
        names = sorted({name for k in src.wrote if k not in held and k in w.input_reads
                        and w.input_reads[k][1] >= src.index
                        and (name := w.input_reads[k][0]) is not None})
        return names + [n for n in w.retained_reads.get(src.index, ()) if n not in names]

    inputs = {src: names for src in mine if (names := read_after(src))}
    # a backward at the statement whose gradient the step trains with, repeated for the
    # input's gradient (FreeLB's ascent steps, Zhu et al. 2020, Algorithm 1: each step's
    # parameter gradient is summed into the update): the method's sum, no leak
    training = {s.site for s in mine if s not in inputs}
    inputs = {src: names for src, names in inputs.items() if src.site not in training}
    if not inputs or len(inputs) == len(mine):
        return
    by_site: dict[Site | None, tuple[Source, list[str], dict[str, torch.Tensor]]] = {}
    together: dict[Site | None, str] = {}
    for src, names in inputs.items():
        _, read, hit = by_site.setdefault(src.site, (src, [], {}))
        read += [n for n in names if n not in read]
        hit.update(mine[src])
        # several inputs read by one name (a loop over a model's states): the list holding
        # them, or the slice of it they fill (``states[1:]``)
        listed = _held_together(w, [k for k in src.wrote if k not in held
                                     and k in w.input_reads], len(names))
        if listed is not None:
            read[:] = [listed]
            together[src.site] = f"*{listed}"
    # the losses that train the tensors beside them: where the step's own gradient comes from
    beside = tuple(dict.fromkeys(s.site.shown() for s in mine
                                 if s not in inputs and s.site is not None))
    opt_text = w.optimizer_text(index, site) or "the optimizer"
    shown = w.names()
    # each network's tensors, those the script's names hold first (a head's model, not the head)
    networks = [{id(p) for p in m.parameters()} for m, _ in [*w._held_by_names(), *w.networks()]]
    for where, (src, read, hit) in by_site.items():
        ids = {id(p) for p in hit.values()}
        whole = [n for n in networks if ids <= n]
        frozen = next((lines[0] for lines, off in reversed(list(w.switching.items()))
                       if any(off & n for n in whole) and not off & ids), None)
        at = ((Site(frozen[0], frozen[1], None).shown(),) if frozen else ()) + (
            (where.shown(),) if where is not None else ()) + beside
        edit = (w.fixes.backward_inputs(where.path, where.line,
                                        together.get(where) or ", ".join(read))
                if where is not None else None)
        keys = tuple(hit)
        w.add(ScriptFinding(
            "leak", w.iteration,
            f"the gradient of {src.label} (backward at {where}), taken for the gradient of "
            f"{', '.join(f'`{n}`' for n in read)}, is in .grad of {len(hit)} tensors when "
            f"{opt_text} steps, beside the loss that trains them"
            + (": the freeze before it switched the rest of their network off, not them"
               if frozen else ": it changes the update"),
            keys, tuple(shown.get(id(p), k) for k, p in hit.items()), at,
            (edit,) if edit is not None else (),
            advice=f"take that backward over {', '.join(read)} alone (backward(inputs=[...]))"
                   f", or freeze the whole network for it", step=w.step_events - 1,
            concerned=keys, cost_bytes=_bytes(list(hit.values()))))


def _held_together(w: WatchState, keys: list[int], names: int) -> str | None:
    """The list or tuple that held the inputs ``keys`` where the script read their ``.grad``
    (by fewer than one ``names`` each), as the script can name them all: the list itself, or
    the slice of it they fill; else ``None``."""
    held = [w.input_reads[k][2] for k in keys]
    if len(keys) <= names or any(h is None for h in held) or \
            len({(h[0], h[2]) for h in held}) != 1:  # type: ignore[index]
        return None
    name, _, length = held[0]  # type: ignore[misc]
    places = sorted(h[1] for h in held)  # type: ignore[index]
    first, last = places[0], places[-1]
    if places != list(range(first, last + 1)) or not name.isidentifier():
        return None
    if first == 0 and last == length - 1:
        return name
    return f"{name}[{first or ''}:{'' if last == length - 1 else last + 1}]"


def moved(w: WatchState, index: int, event: int, stepped) -> None:
    """Two backwards of this step in one ``.grad``, the tensors moved in place between them
    (SAM's ``p.add_(e_w)`` without the ``zero_grad()`` before its second pass): the gradient
    at the weights before the move is added to the gradient at the weights after it. Gradient
    accumulation over micro-batches leaves the weights where they were, and is not this. The
    edit clears the gradient before the later backward, with the optimizer as its caller
    names it."""
    hit: dict[tuple[Source, Source], list[tuple[str, torch.Tensor]]] = {}
    for key, p in stepped:
        own = sorted((s for s in w.ledger.live.get(id(p), [])
                      if s.step == event and s.index >= 0), key=lambda s: s.index)
        for early, late in itertools.pairwise(own):
            was, now = early.versions.get(id(p)), late.versions.get(id(p))
            if was is not None and now is not None and was != now:
                hit.setdefault((early, late), []).append((key, p))
                break
    if not hit:
        return
    names = w.names()
    opt = w.optimizers[index]
    for (early, late), tensors in hit.items():
        name = late.names.get(id(opt))
        edits: tuple = ()
        if name is not None and late.site is not None:
            e = w.fixes.insert_before(late.site.path, late.site.line, f"{name}.zero_grad()")
            edits = (e,) if e is not None else ()
        keys = tuple(k for k, _ in tensors)
        w.add(ScriptFinding(
            "stale", w.iteration,
            f"{plural(len(tensors), 'tensor')} hold the gradient of {early.label} (backward at "
            f"{early.site}) when {late.label} (backward at {late.site}) adds its own, and the "
            f"script moved them in place between the two: the step uses the sum of the "
            f"gradients at two different weights (it changes the update)",
            keys, tuple(names.get(id(p), k) for k, p in tensors),
            tuple(s.shown() for s in (early.site, late.site) if s is not None), edits,
            advice=f"call {name or 'the optimizer'}.zero_grad() before the second backward()",
            step=w.step_events - 1, concerned=keys, cost_bytes=_bytes([p for _, p in tensors])))


def shared(w: WatchState, index: int, opt: torch.optim.Optimizer, stepped,
           called: int | None = None, closure: object = None) -> None:
    """A tensor another optimizer stepped with the gradient it holds now (no backward() wrote it
    since): the one gradient moves it twice. For a step handed a closure (judged when it
    returns; ``called``: the event of the call), a tensor another optimizer stepped with the
    gradient the closure's ``backward()`` then added to, nothing clearing it in between (L-BFGS
    after Adam, its closure without ``zero_grad()``): the closure's gradient and the one the
    other optimizer stepped with move it together; one finding for all of them, whose edit
    clears them first thing in ``closure`` (:func:`_closure_clear`). Or a tensor two optimizers
    step, each after its own backward(), that the script holds in a list whose items are one
    network: the members of an ensemble made ``[Net()] * k``, every round trained once per
    member's optimizer, each with a state of its own (found at the second member's first step,
    so in the iterations ``--steps`` audits). Without such a list, two optimizers over one
    tensor, each after its own backward(), are no finding: two phases of the script
    (pre-training, then fine-tuning), or optimizers over overlapping parts of networks
    (InfoGAN's)."""
    again: list[tuple[str, torch.Tensor]] = []   # stepped after other optimizers did
    others: set[int] = set()
    added: list[tuple[str, torch.Tensor, int]] = []   # a closure's gradient added to them
    # stepped by another optimizer with the same gradient, by the first of them
    twice: dict[int, list[tuple[str, torch.Tensor]]] = {}
    for key, p in stepped:
        by = w.stepped_by.setdefault(id(p), {})
        before = [(i, event) for i, event in by.items() if i != index
                  and event > w.written_at.get(id(p), -1)]
        # the other optimizers that stepped it since this one last did (or at all, where this
        # one never has), each after its own backward()
        mine = by.get(index, -1)
        between = [i for i, event in by.items() if i != index and event > mine]
        if any(i != index for i in by):   # the first step of a second optimizer over it
            w.second_stepped.setdefault(id(p), w.step_events - 1)
        by[index] = w.events
        # written by the closure since the call: added to, if nothing cleared it since the
        # other optimizer's step
        onto = [i for i, event in by.items() if i != index and event < called
                and event > w.cleared_at.get(id(p), -1)
                and w.written_at.get(id(p), -1) > called] \
            if called is not None and not before else []
        if onto and p.grad is not None and nonzero(p.grad):
            added.append((key, p, min(onto)))
        elif before and p.grad is not None and nonzero(p.grad):
            twice.setdefault(min(i for i, _ in before), []).append((key, p))
        elif between:
            again.append((key, p))
            others.update(between)
    names = w.names() if twice else {}
    for first, hit in twice.items():
        at = tuple(s.shown() for s in (w.built_at.get(id(w.optimizers[j]))
                                       for j in (first, index)) if s is not None)
        w.add(ScriptFinding(
            "shared", w.iteration,
            f"{plural(len(hit), 'tensor')} {'is' if len(hit) == 1 else 'are'} stepped by "
            f"optimizers {first} and {index} with one gradient (no backward() wrote "
            f"{'it' if len(hit) == 1 else 'them'} between the steps): "
            f"{'it moves' if len(hit) == 1 else 'they move'} twice",
            tuple(k for k, _ in hit), tuple(names.get(id(p), k) for k, p in hit), at,
            advice="give each tensor to one optimizer", step=w.step_events - 1))
    if again:
        _members_one_network(w, index, sorted(others), again)
    if added:
        _added_to(w, index, opt, closure, added)


def _added_to(w: WatchState, index: int, opt: torch.optim.Optimizer, closure: object,
              added: list[tuple[str, torch.Tensor, int]]) -> None:
    """One finding for the tensors a closure's gradient was added to, the gradient another
    optimizer stepped with still there; its edit clears them first thing in the closure."""
    name = w.assigned(w.built_at.get(id(opt)))
    other = min(i for _, _, i in added)
    clear = _closure_clear(w, closure, name) if name and name.isidentifier() else None
    keys = tuple(k for k, _, _ in added)
    at = (*(s.shown() for s in (w.built_at.get(id(w.optimizers[j])) for j in (other, index))
            if s is not None), *((clear[1].shown(),) if clear is not None else ()))
    w.add(ScriptFinding(
        "shared", w.iteration,
        f"the closure of {f'`{name}`' if name else f'optimizer {index}'}'s step adds its "
        f"gradient to the one optimizer {other} stepped {plural(len(keys), 'tensor')} with "
        f"(nothing cleared them between): that gradient moves them again",
        keys, tuple(w.names().get(id(p), k) for k, p, _ in added), at,
        (clear[0],) if clear is not None else (),
        advice=f"clear them in the closure before its backward(): "
               f"{name or 'optimizer'}.zero_grad()", step=w.step_events - 1, concerned=keys))


def _closure_clear(w: WatchState, closure: object, name: str):
    """``name.zero_grad()`` inserted before the first statement of ``closure`` that is not a
    ``global``, ``nonlocal`` or its docstring, with that statement's site; ``None`` where the
    closure is no function of the user's files."""
    code = getattr(closure, "__code__", None)
    if code is None or not is_user(code.co_filename):
        return None
    first = S.first_statement(code.co_filename, code.co_firstlineno)
    if first is None:
        return None
    edit = w.fixes.insert_before(code.co_filename, first, f"{name}.zero_grad()")
    return (edit, Site(code.co_filename, first, None)) if edit is not None else None


def views(w: WatchState, index: int, stepped) -> None:
    """A tensor the ``index``-th optimizer steps that shares its storage with a tensor of the
    script's networks that is frozen, or that no optimizer holds (a soft prompt made as
    ``nn.Parameter(embed.weight[:n].detach())``, without ``.clone()``): each step writes into
    that frozen tensor too. Judged once per tensor, at its first step; the edit takes a copy
    where the stepped tensor is assigned (``.detach().clone()``). Views of one buffer that are all
    stepped (a flat parameter's parts) are no finding."""
    new = [(k, p) for k, p in stepped if id(p) not in w.storage_checked]
    if not new:
        return
    w.storage_checked.update(id(p) for _, p in new)
    held = {id(p) for o in w.optimizers for g in o.param_groups for p in g["params"]}
    frozen: dict[int, dict[int, torch.Tensor]] = {}
    buffers: dict[int, list[tuple[str, torch.Tensor]]] = {}
    for network, name in w.networks():
        for q in network.parameters():
            if (not q.requires_grad or id(q) not in held) and q.numel():
                frozen.setdefault(q.untyped_storage().data_ptr(), {})[id(q)] = q
        for b_name, b in network.named_buffers():
            at = buffers.setdefault(b.untyped_storage().data_ptr(), [])
            if b.is_floating_point() and b.numel() and all(c is not b for _, c in at):
                at.append((f"{name}.{b_name}" if name else b_name, b))
    names = w.names()
    viewed: list[tuple[str, torch.Tensor, list[tuple[str, torch.Tensor]]]] = []
    for key, p in new:
        shares = [q for q in frozen.get(p.untyped_storage().data_ptr(), {}).values()
                  if q is not p]
        kept = buffers.get(p.untyped_storage().data_ptr())
        if kept and not shares:
            viewed.append((key, p, kept))
        if not shares:
            continue
        shown = names.get(id(p), key)
        where, fix = next((((path, name), f) for path, name in holders(p)
                           if (f := w.fixes.copy_snapshot(path, name)) is not None),
                          (None, None))
        held_as = where[1] if where is not None else shown
        frozen_names = tuple(names.get(id(q), "?") for q in shares)
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"`{held_as}` shares its storage with {', '.join(f'`{n}`' for n in frozen_names)}, "
            f"{'which is' if len(shares) == 1 else 'which are'} frozen: each step of "
            f"`{held_as}` writes into {'it' if len(shares) == 1 else 'them'} too",
            (key,), (held_as, *frozen_names),
            ((Site(where[0], fix[0], None).shown(),) if where and fix else ()),
            tuple(fix[1]) if fix is not None else (),
            advice=f"make `{held_as}` a copy where it is made (`.detach().clone()`)",
            step=w.step_events - 1, concerned=(key,)))
    if viewed:
        _buffer_views(w, viewed, names)


def _buffer_views(w: WatchState,
                  viewed: list[tuple[str, torch.Tensor, list[tuple[str, torch.Tensor]]]],
                  names: dict[int, str]) -> None:
    """Stepped tensors whose storage a network's buffer shares (Mixout's target taken as
    ``self.weight.detach()``, no ``.clone()``: a buffer is state kept apart from what trains,
    and each step moves it with the weight): a failure per buffer name, at its registration,
    whose edit copies it there."""
    by_buffer: dict[str, list[tuple[str, torch.Tensor, list[tuple[str, torch.Tensor]]]]] = {}
    for entry in viewed:
        by_buffer.setdefault(entry[2][0][0].rsplit(".", 1)[-1], []).append(entry)
    for buffer, entries in by_buffer.items():
        fix = next((f for path in dict.fromkeys(w.user_paths.values())
                    if (f := w.fixes.copy_registered(path, buffer)) is not None), None)
        keys = tuple(key for key, _, _ in entries)
        shown = tuple(names.get(id(p), key) for key, p, _ in entries)
        kept = tuple(kept[0][0] for _, _, kept in entries)
        at = (Site(fix[1][0].path, fix[0], None).shown(),) if fix and fix[1] else ()
        w.add(ScriptFinding(
            "aliased", w.iteration,
            f"{plural(len(kept), 'buffer')} ({', '.join(f'`{n}`' for n in kept)}) "
            f"{'shares its' if len(kept) == 1 else 'share their'} storage with "
            f"{', '.join(f'`{n}`' for n in shown)}, which an optimizer steps: each step "
            f"writes into {'it' if len(kept) == 1 else 'them'} too, and the state kept "
            f"there moves with what trains", keys, (*shown, *kept), at,
            tuple(fix[1]) if fix is not None else (),
            advice="register a copy as the buffer (`.detach().clone()`)",
            step=w.step_events - 1, concerned=keys))


def _members_one_network(w: WatchState, index: int, others: list[int],
                         tensors: list[tuple[str, torch.Tensor]]) -> None:
    """One finding for the tensors optimizer ``index`` steps after ``others`` did, each after
    its own backward(), where its scope holds a list whose items are one module holding them:
    at that list's assignment, once per list (see :func:`shared`)."""
    site = w.built_at.get(id(w.optimizers[index]))
    if site is None:
        return
    held = {id(p) for _, p in tensors}
    listed = None
    for name, value in w.built_scope.get(id(w.optimizers[index]), {}).items():
        if not isinstance(value, list | tuple) or len(value) < 2:
            continue
        items = [(i, v) for i, v in enumerate(value) if isinstance(v, torch.nn.Module)
                 and held & {id(q) for q in v.parameters()}]
        if len(items) >= 2 and len({id(v) for _, v in items}) == 1:
            listed, (first, member) = name, items[0]
            break
    if listed is None or any(f.kind == "shared" and f.extra.get("list") == listed
                             for f in w.findings.values()):
        # optimizers over overlapping parts, each stepping after its own loss, are a method
        # (InfoGAN's information optimizer over both networks): only one network standing
        # for several members of a list says that the script meant several
        return
    # named by the list that holds the one network (``agents.0.body.0.weight``)
    names = {**w.names(), **{id(q): f"{listed}.{first}.{n}"
                             for n, q in member.named_parameters()}}
    built = [w.built_at.get(id(w.optimizers[j])) for j in [*others, index]]
    at = [s.shown() for s in dict.fromkeys(built) if s is not None]
    edits: tuple = ()
    found = w.fixes.made_per_item(site.path, listed)
    if found is not None:
        line, made = found
        at.insert(0, Site(site.path, line, None).shown())
        edits = tuple(made)
    stepping = sorted({*others, index})
    w.add(ScriptFinding(
        "shared", w.iteration,
        f"{plural(len(tensors), 'tensor')} {'is' if len(tensors) == 1 else 'are'} stepped by "
        f"optimizers {', '.join(map(str, stepping[:-1]))} and {stepping[-1]}, each after its "
        f"own backward(): the items of `{listed}` are one network, which every round trains "
        f"once per optimizer, each with a state of its own",
        tuple(k for k, _ in tensors), tuple(names.get(id(p), k) for k, p in tensors), tuple(at),
        edits, advice="give each tensor to one optimizer: make each member its own network",
        # training differs from the step of the second optimizer over them; with the list
        # made anew, from the first (the members' initial weights differ)
        step=0 if edits else min(w.second_stepped.get(id(p), w.step_events - 1)
                                 for _, p in tensors),
        concerned=("*",), extra={"list": listed}))


def wasted(w: WatchState) -> None:
    names = w.names()
    groups: dict[Source, list[int]] = {}
    for src, key in w.ledger.wasted:
        groups.setdefault(src, []).append(key)
    w.ledger.wasted = []
    for src, keys in groups.items():
        if src.index < 0 or src in w._cleared_sources or src.index in w.read_sources or \
                cut_terms.judged(w, src):
            continue
        ts = [w.ledger.tensors[k] for k in keys]
        cost = _bytes(ts)
        shown = tuple(names.get(k, "?") for k in keys)
        w.add(ScriptFinding(
            "wasted", src.iteration,
            f"{src.label} (backward at {src.site}) writes gradient into {len(keys)} tensors "
            f"that is cleared before any step uses it ({_kib(cost)} of gradient): harmless, "
            f"work done in vain", tuple(shown), shown,
            (src.site.shown(),) if src.site else (), cost_bytes=cost,
            advice="freeze them (requires_grad_(False)) or cut where this loss reads them, "
                   "if they are not meant to pass gradient on"))


def frozen(w: WatchState, index: int, opt: torch.optim.Optimizer, site: Site | None) -> None:
    """Tensors an optimizer held with ``requires_grad`` at an earlier step of its own,
    switched off since and still held: frozen mid-run (for another network's step, say) and
    never switched back on, the optimizer steps them with no gradient.

    The finding waits (:attr:`.state.WatchState.pending_frozen`): a later
    step of the same optimizer that finds them all switched back on drops it (some: it keeps
    those still off, found at that step), since a freeze for a phase (a new head trained
    alone before the whole network, as in learning without forgetting's warm-up) is the
    method's; :func:`settle` reports what is left at the end. Where the script switched some
    back on for a phase and left the rest off, the edit switches the rest on before that
    phase's loop.

    So too an optimizer every tensor of which is off at its step, none ever on at an earlier
    one: built over a network frozen before it (a phase that kept a pretrained encoder fixed)
    and stepped with no gradient, the freeze never undone for the phase it was built for. Not
    a freeze under a condition on the run's progress (:mod:`.never_trained` judges those)."""
    holds = keyed(index, opt)
    # on at one of this optimizer's own steps: a tensor frozen before the optimizer was built
    # (BitFit's weights, kept fixed while a new optimizer over the whole model trains the
    # biases), having trained in an earlier phase under another, is frozen for this one
    mine = w.trainable_by.get(index, set())
    frozen = [(k, p) for k, p in holds if not p.requires_grad and id(p) in mine]
    never_on = not frozen and bool(holds) and not any(
        p.requires_grad or id(p) in w.trainable_seen or _switched_on_progress(w, p)
        for _, p in holds)
    if never_on:
        frozen = holds
    # or on when this optimizer was built, trained under an earlier one, and switched off
    # before this one's first step (learning without forgetting's warm-up): the method's own
    # freeze for a phase, unless a later step finds part of it switched back on and the rest
    # left off; only then reported (see :func:`settle`)
    built_on = w.on_at_build.get(index, set())
    after_build = not frozen and [(k, p) for k, p in holds if not p.requires_grad
                                  and id(p) in built_on and id(p) in w.trainable_seen]
    if after_build:
        frozen = after_build
    # or made fresh for this phase (a new classifier, made once an earlier optimizer had
    # stepped and before this one was built) and switched off before any step: it keeps the
    # values it was made with (BitFit's new head, frozen with the weights it should not be)
    fresh = not frozen and [(k, p) for k, p in holds if _made_for_the_phase(w, index, p)]
    if fresh:
        frozen, never_on = fresh, True
    # or named one by one in the optimizer's call, each off at its step and never on (an echo
    # state network's reservoir frozen whole, before the phase whose optimizer names its input
    # scale and leaking rate): chosen for this optimizer, which never steps them
    listed = not frozen and _listed_off(w, index, opt, holds)
    if listed:
        frozen, never_on = listed, True
    waiting = w.pending_frozen.get(index)
    partly = False
    if waiting is not None:
        if {id(p) for _, p in frozen} >= {id(p) for p in waiting[1]}:
            return   # as first found
        # some switched back on since: those still off are found anew, here
        del w.pending_frozen[index]
        w.phase_frozen.discard(index)
        held = {id(p) for p in waiting[1]}
        frozen = [(k, p) for k, p in frozen if id(p) in held]
        partly = True
    if not frozen:
        return
    if after_build and not partly:
        w.phase_frozen.add(index)
    names = w.names()
    owner = w.owner(id(frozen[0][1]))
    name = w.roots[id(owner)][1] if owner is not None else None
    if owner is None and len(frozen) == 1:   # a leaf of its own (synthetic images)
        name = names.get(id(frozen[0][1]))
    ids = {id(p) for _, p in frozen}
    fix = (w.fixes.unfreeze_before(site.path, name, site.line)
           if site is not None and name else None)
    if fresh:
        # made for this phase and frozen by a line of the script's that freezes exactly them
        # (latent diffusion's class embedder, ``requires_grad_(False)`` beside the frozen
        # autoencoder's): that line taken away, the cause, not a switch back on after it
        removed = next((e for lines, off in reversed(list(w.switching.items()))
                        if lines and off == ids for path, line in lines
                        if (e := w.fixes.freeze_removed(path, line)) is not None), None)
        if removed is not None:
            fix = (removed.line, removed)
            if owner is not None and name:   # the advice names the part frozen
                name = _holding(owner, name, ids) or name
    if fix is None and (partly or never_on) and site is not None and owner is not None \
            and name:
        # the script switched some of them back on for this phase and left the rest off
        # (``model.heads.requires_grad_(True)`` for ``model.requires_grad_(True)``), or none
        # was ever on: those off switched on before the phase's loop, by the submodule that
        # holds exactly them
        part = _holding(owner, name, ids)
        if part is None and len(frozen) == 1:   # one tensor of its module: by its own name
            part = next((name + S.attribute_path(n) for n, q in owner.named_parameters()
                         if q is frozen[0][1]), None)
        edit = w.fixes.switch_on_before_loop(site.path, part, site.line) if part else None
        if edit is not None:
            fix = (edit.line, edit)
            name = part
    built = w.built_at.get(id(w.optimizers[index]))
    if fix is None and never_on and owner is None and name and name.isidentifier() and \
            built is not None:
        # a leaf of its own made without requires_grad (``log_vars = torch.zeros(3)`` for
        # Kendall et al.'s learned log variances), never switched on: on before the optimizer
        # that holds it is built
        edit = w.fixes.insert_before(built.path, built.line, f"{name}.requires_grad_(True)")
        if edit is not None:
            fix = (edit.line, edit)
    if fix is None and site is not None:
        # frozen where the script switches others back on after it (a test's freeze of two
        # networks, one switched back on): this one switched on there too
        # or, where the freezing call's block steps an optimizer after it (TD-MPC's Q networks
        # frozen for the policy's loss), switched on after that step: by each of the
        # script's lines that made the freeze, the innermost first
        freeze = next((lines for lines, off in reversed(list(w.switching.items()))
                       if lines and ids <= off), ())
        edit = next((e for path, line in freeze
                     if (e := w.fixes.switch_on_with_the_rest(path, line)
                         or w.fixes.switch_on_after_its_step(path, line)
                         or w.fixes.switch_on_after_its_use(path, line)
                         or w.fixes.freeze_removed(path, line)) is not None), None)
        if edit is not None:
            fix = (edit.line, edit)
    at = ((Site(site.path, fix[0], None).shown(),) if fix is not None and site else ()) + (
        (site.shown(),) if site is not None else ())
    opt_text = w.optimizer_text(index, site) or "the optimizer"
    keys = tuple(k for k, _ in frozen)
    w.pending_frozen[index] = (ScriptFinding(
        "frozen", w.iteration,
        f"{opt_text} steps {plural(len(frozen), 'tensor')} whose requires_grad "
        + ("was made for this phase and switched off before any step: it keeps the values "
           "it was made with" if fresh else
           "is off at each of its steps, switched off before it was built and never back on"
           if never_on else "was switched off after an earlier step and not back on")
        + ": they get no gradient and stay as they are", keys,
        tuple(names.get(id(p), k) for k, p in frozen), at,
        (fix[1],) if fix is not None else (),
        advice=f"switch them back on ({name or 'the network'}.requires_grad_(True)) "
               f"before the loss that trains them", step=w.step_events - 1,
        concerned=keys), [p for _, p in frozen])


def _listed_off(w: WatchState, index: int, opt: torch.optim.Optimizer,
                holds: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    """The tensors of the groups the ``index``-th optimizer's call names one by one
    (:func:`~toolkit.audit.record.syntax.listed_groups`), off and never on at any step, not
    switched off under a condition on the run's progress."""
    built = w.built_at.get(id(opt))
    groups = S.listed_groups(built.path, built.span) if built is not None else set()
    if not groups:
        return []
    named = {id(p) for g in groups if g < len(opt.param_groups)
             for p in opt.param_groups[g]["params"]}
    return [(k, p) for k, p in holds if id(p) in named and not p.requires_grad
            and id(p) not in w.trainable_seen and not _switched_on_progress(w, p)]


def _switched_on_progress(w: WatchState, p: torch.Tensor) -> bool:
    """Whether the script switches ``p``'s ``requires_grad`` under a condition on the run's
    progress (:mod:`.never_trained` judges those)."""
    return any(id(p) in tensors for lines, tensors in w.switching.items()
               if w.progress_conditions(lines))


def _made_for_the_phase(w: WatchState, index: int, p: torch.Tensor) -> bool:
    """Whether ``p``, held by the ``index``-th optimizer and off, was made trainable once an
    earlier optimizer existed and stepped, before this one was built, and was never on at any
    step since; not switched off under a condition on the run's progress."""
    leaf, made = w.made_leaves.get(id(p)), w.made_in.get(id(p))
    if p.requires_grad or leaf is None or leaf[0]() is not p or made is None or \
            not 0 < made[0] <= index or id(p) in w.trainable_seen:
        return False
    if not any(e > -1 for i, e in w.optimizer_stepped.items() if i < made[0]):
        return False
    return not _switched_on_progress(w, p)


def _holding(module: torch.nn.Module, name: str, ids: set[int]) -> str | None:
    """The submodule of ``module`` (called ``name``) whose tensors are exactly ``ids``, as the
    code writes it (``model.backbone``, ``net[0]``), or ``None``."""
    for path, sub in module.named_modules():
        if {id(p) for p in sub.parameters()} == ids:
            return name + S.attribute_path(path)
    return None


def settle(w: WatchState) -> None:
    """At the end of the run (or of the audit): the frozen tensors no later step of their
    optimizer found switched back on; not a freeze made after the optimizer was built that
    no later step found partly undone (a phase's own)."""
    for index, (finding, _) in w.pending_frozen.items():
        if index not in w.phase_frozen:
            w.add(finding)
    w.pending_frozen.clear()
    w.phase_frozen.clear()


def _bytes(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _kib(n: int) -> str:
    return f"{n / 1024:.3g} KiB" if n < 2**20 else f"{n / 2**20:.3g} MiB"
