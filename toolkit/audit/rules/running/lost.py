"""Gradient lost to a clear (``cleared``): gradient that a ``backward()`` wrote into tensors an
optimizer holds, and that a clear (``optimizer.zero_grad()``, ``model.zero_grad()``,
``p.grad = None``, with ``set_to_none`` or not) removed before any optimizer step or the
script's own code read it, with no step of any optimizer between the backward() and the clear.
The step that follows uses the gradient of the backward() calls after the clear only:
``zero_grad()`` moved into a gradient-accumulation loop trains on the last micro-batch. The
finding is at the clear's line; its edit moves the clear to after the step it precedes (after
the steps and ``scaler.update()`` that follow it in its block), so that every ``backward()``
between two steps is summed. A clear between two ``backward()`` calls of one update, the lost
one a statement of its own before it in its block (DQfD's agent batch, then its expert batch),
moves before that ``backward()`` instead: after the step it would sum the gradient an earlier
phase left into the first update. A clear through a second name of the network, bound from the
first by a plain assignment and called with gradients as a network of its own (STORM's or
SVRG's previous iterate, ``previous = model``), is the alias at work: ``aliased``, at the
assignment, whose edit makes it a deep copy
(:func:`~toolkit.audit.rules.running.copies.cleared_through`).

Not lost: gradient a step read (a loss that trains two networks, whose part in one of them is
cleared after the other's optimizer stepped with it: ``wasted``, information); gradient cleared
after another optimizer stepped (the step the backward preceded: its part in these tensors was
not meant for their optimizer, even where that step found none of it), unless it came to them
through a gradient reversal (:mod:`~toolkit.audit.record.reversal`), which makes a loss's
gradient for the tensors below it: that is a failure at the backward, whose edit steps their
optimizer after the steps that follow it (MME's extractor, Saito et al. 2019); gradient the script
read from ``.grad`` itself before clearing it (per-example gradients, clipped and summed by
hand); gradient cleared under a condition (a scheduled freeze: ``never_trained`` judges it over
the whole run); gradient a ``GradScaler`` read and skipped the step for; gradient another tensor
still holds (it may yet be stepped)."""

from __future__ import annotations

import ast

import torch

from toolkit.audit.edit import Edit
from toolkit.audit.files import split_lines
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site
from toolkit.audit.record.ledger import Source
from toolkit.audit.result import plural
from toolkit.audit.rules.running import copies
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.rules.running.state import WatchState

__all__ = ["lost", "read"]

#: calls that end an update with the step: another optimizer's step, a scheduler's, a
#: ``GradScaler``'s ``update()``; a clear moved after the step goes after them
_ENDS_UPDATE = frozenset({"step", "update"})


def read(w: WatchState, tensor: torch.Tensor) -> None:
    """The script read ``tensor``'s ``.grad`` (or a ``GradScaler`` did, to step with it): the
    backward() calls whose gradient it holds now are read, not lost when it is cleared."""
    key = id(tensor)
    cleared = w.cleared_at.get(key, -1)
    for src in w.ledger.live.get(key, ()):
        if src.index > cleared:
            w.read_sources.add(src.index)
            w.read_keys.setdefault(src.index, set()).add(key)


def lost(w: WatchState, index: int, site: Site | None) -> None:
    """At a step (``site``, of the ``index``-th optimizer): the gradient the ledger saw cleared
    before any step used it (its ``wasted`` list), that no step and no user code read and no
    tensor holds any more, from tensors an optimizer holds: one failure per clear."""
    if not w.ledger.wasted:
        return
    held = w.keyed_map()
    groups: dict[Site, tuple[list[Source], dict[int, str]]] = {}
    cleared_at: dict[Site, int] = {}
    reversed_: dict[tuple[int, int], tuple[Source, dict[int, str]]] = {}
    owners: dict[int, int] = {}   # tensor id -> its optimizer's index, read when first needed
    for src, key in w.ledger.wasted:
        if (src.index < 0 or key not in held or key in w.scheduled
                or src in w._cleared_sources or _still_held(w, src, held)):
            continue
        clear = next((c for c in w.clears if c[2] >= src.index and key in c[1]), None)
        if clear is None or _read(w, src, held, key, clear[2]):
            continue
        if src.step is not None or _stepped_between(w, src.index, clear[2]):
            if key in src.reversed:   # through a reversal: made for these tensors' optimizer
                owners = owners or w.stepped_map()
                reversed_.setdefault((owners[key], src.index), (src, {}))[1][key] = held[key]
            continue
        sources, keys = groups.setdefault(clear[0], ([], {}))
        cleared_at[clear[0]] = clear[2]
        if src not in sources:
            sources.append(src)
        keys[key] = held[key]
    names = w.names()
    for (owner, _), (src, keys) in reversed_.items():
        _not_stepped(w, owner, src, keys, names)
    for clear_site, (sources, keys) in groups.items():
        w._cleared_sources.update(sources)
        first = sources[0]
        # through a second name of the network: the alias is the fix, not the clear
        alias = copies.cleared_through(w, clear_site)
        if alias is not None:
            copy, online, line, edits = alias
            bound = Site(clear_site.path, line, None)
            w.add(ScriptFinding(
                "aliased", first.iteration,
                f"`{copy}` and `{online}` are one network: {clear_site.text()} at {clear_site} "
                f"clears the gradient of {first.label} (backward at {first.site}) in "
                f"{len(keys)} tensors of `{online}`, and the backward through `{copy}` writes "
                f"into them: the script computes the gradient of `{copy}` as a network of its "
                f"own, and gets `{online}`'s", tuple(keys.values()),
                tuple(names.get(k, keys[k]) for k in keys),
                tuple(s.shown() for s in (bound, clear_site, first.site, site) if s is not None),
                tuple(edits), advice=f"make `{copy}` a copy: {copy} = copy.deepcopy({online})",
                # the copy's gradient parts from the network's from its first backward on
                step=w.step_events - 1, concerned=("*",)))
            continue
        # a clear between two backward() calls of one update (the second batch's loss, the
        # clear copied from a one-batch loop) goes before the first of them; one inside an
        # accumulation loop, whose lost backward() follows it, after the step
        after = {s.site for k in keys for s in w.ledger.live.get(k, ())
                 if s.index > cleared_at[clear_site]}
        moved = _moved_before(w.fixes, clear_site, first.site) \
            if first.site is not None and first.site not in after else None
        if moved is None and site is not None:
            moved = _moved_after(w.fixes, clear_site, site)
        shown_clear = moved[0] if moved else clear_site
        # the condition a moved clear leaves behind, then the clear itself
        clears = (shown_clear, clear_site) if shown_clear.line < clear_site.line else (
            shown_clear,)
        at = tuple(s.shown() for s in (*clears, first.site, site) if s is not None)
        tensors = [w.ledger.tensors[k] for k in keys]
        opt_text = w.optimizer_text(index, site) or "the optimizer"
        calls = plural(len(sources), "backward() call")
        w.add(ScriptFinding(
            "cleared", first.iteration,
            f"the gradient of {first.label} (backward at {first.site}) in {len(keys)} tensors "
            f"is cleared by {clear_site.text()} at {clear_site} before any step read it "
            f"({calls} of this update lost): "
            f"{opt_text} steps with the gradient of the backward() calls after the clear "
            f"only (it changes the update)", tuple(keys.values()),
            tuple(names.get(k, keys[k]) for k in keys), at, moved[1] if moved else (),
            advice="clear the gradients once per update: after the step, or before the first "
                   "backward() whose gradient it sums",
            step=w.step_events - 1, concerned=tuple(keys.values()),
            cost_bytes=sum(t.numel() * t.element_size() for t in tensors)))


def _not_stepped(w: WatchState, index: int, src: Source, keys: dict[int, str],
                 names: dict[int, str]) -> None:
    """The gradient ``src`` sent through a gradient reversal into ``keys``, which the
    ``index``-th optimizer holds, cleared after another optimizer stepped and before this one
    did: the minimax's other half never trains them (MME's feature extractor, whose step is
    left out after the entropy's backward). A failure at the backward, whose edit steps the
    optimizer after the steps that follow it, as the published loop does."""
    w._cleared_sources.add(src)
    opt = w.optimizers[index]
    built = w.built_at.get(id(opt))
    name = w.assigned(built)
    called = f"`{name}`" if name else "the optimizer that holds them"
    site = src.site
    after = S.steps_after(site.path, site.line, name) \
        if site is not None and name and name.isidentifier() else None
    edit = w.fixes.insert_after(site.path, after, f"{name}.step()") \
        if after is not None and site is not None else None
    # where the step goes (before the line the edit inserts at), the backward, the optimizer
    at = tuple(s.shown() for s in (Site(edit.path, edit.line, None) if edit else None,
                                    site, built) if s is not None)
    shown = tuple(names.get(k, keys[k]) for k in keys)
    w.add(ScriptFinding(
        "cleared", src.iteration,
        f"the gradient of {src.label} (backward at {src.site}) reaches {len(keys)} tensors "
        f"through a gradient reversal, made for them (the other half of the minimax), and is "
        f"cleared before {called} steps with it: another optimizer stepped after that "
        f"backward, and these tensors never train against that loss",
        tuple(keys.values()), shown, at, (edit,) if edit is not None else (),
        advice=f"step {called} after that backward, with the optimizer stepped there",
        step=w.step_events - 1, concerned=tuple(keys.values())))


def _stepped_between(w: WatchState, written: int, cleared: int) -> bool:
    """Whether an optimizer stepped between a backward (event ``written``) and a clear (event
    ``cleared``): the step that backward preceded was another optimizer's, made without this
    gradient (a loss whose part in another network was not meant for it)."""
    for event in reversed(w.step_optimizer):
        if event <= written:
            return False
        if event <= cleared:
            return True
    return False


def _read(w: WatchState, src: Source, held: dict[int, str], key: int, cleared: int) -> bool:
    """Whether the script read the gradient ``src`` wrote into ``key`` before the clear at
    event ``cleared``. Read from a tensor an optimizer holds (per-example gradients), or by a
    step (a closure's, a ``GradScaler``'s), it is; read from an input only (an attack's
    perturbation, a sampler's state), the part in the optimizers' tensors is read too, unless
    the step after the clear goes on with the gradient of that same statement (FreeLB's ascent
    steps, each one's parameter gradient meant for the update; a sampler's backward is a
    statement of its own, its part in the network cleared before the loss's)."""
    if src.index not in w.read_sources:
        return False
    keys = w.read_keys.get(src.index)
    if keys is None or any(k in held for k in keys):
        return True
    return not any(s.site == src.site and s.index > cleared for s in w.ledger.live.get(key, ()))


def _still_held(w: WatchState, src: Source, held: dict[int, str]) -> bool:
    """Whether a tensor an optimizer holds, of those ``src`` wrote, still holds its gradient
    (no clear since): a step may yet read it. (An input's ``.grad``, an attack's
    perturbation's, is stepped by none.)"""
    return any(src in w.ledger.live.get(k, ()) and w.cleared_at.get(k, -1) < src.index
               for k in src.wrote if k in held)


def _parents(tree: ast.Module) -> dict[int, tuple[ast.AST, list[ast.stmt]]]:
    """Each statement, by ``id``, with the node and the block (list of statements) holding it."""
    out: dict[int, tuple[ast.AST, list[ast.stmt]]] = {}
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                for st in block:
                    if isinstance(st, ast.stmt):
                        out[id(st)] = (node, block)
    return out


def _ends_update(st: ast.stmt) -> bool:
    call = st.value if isinstance(st, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
        call.func.attr in _ENDS_UPDATE


def _moved_after(fixes: FixWriter, clear: Site, step: Site) -> tuple[Site, tuple[Edit, ...]] | None:
    """The clear's statement (or the loop around it, when it is the loop's only statement:
    ``for p in params: p.grad = None``; with the ``if`` around them, when they are its only
    statement), and the edits that move it to after the step's statement and the steps and
    updates right after it in its block, at their indentation (without the ``if``). ``None``
    when the two are in different files, or the statements share their lines."""
    if clear.path != step.path:
        return None
    parsed = S.syntax_tree(clear.path)
    found, target = S.statement_at(clear.path, clear.line), S.statement_at(step.path, step.line)
    if parsed is None or found is None or target is None:
        return None
    tree, text = parsed
    parents = _parents(tree)
    stmt: ast.stmt = found[0]
    while id(stmt) in parents:
        node, block = parents[id(stmt)]
        if not (isinstance(node, ast.For | ast.While) and block is node.body
                and len(block) == 1 and not node.orelse):
            break
        stmt = node
    # a clear that is the only statement of an ``if`` (no ``else``) goes with its condition:
    # once moved after the step it runs once per update, and the condition gates nothing
    removed = stmt
    if id(stmt) in parents:
        node, block = parents[id(stmt)]
        if isinstance(node, ast.If) and block is node.body and len(block) == 1 \
                and not node.orelse:
            removed = node
    anchor: ast.stmt = target[0]
    if id(anchor) not in parents:
        return None
    block = parents[id(anchor)][1]
    at = block.index(anchor)
    while at + 1 < len(block) and _ends_update(block[at + 1]):
        at += 1
    anchor = block[at]
    lines = split_lines(text)
    start, end = removed.lineno, removed.end_lineno or removed.lineno
    last = anchor.end_lineno or anchor.lineno
    if start <= anchor.lineno <= end or not _alone(lines, removed) or not _alone(lines, stmt) \
            or not _alone(lines, anchor):
        return None
    first, final = stmt.lineno, stmt.end_lineno or stmt.lineno
    old, new = S.indent_of(text, first), S.indent_of(text, anchor.lineno)
    body = "".join(new + x[len(old):] if x.startswith(old) and x.strip() else x
                   for x in lines[first - 1:final])
    if not body.endswith("\n"):
        body += "\n"
    return (Site(clear.path, start, None),
            (fixes.edit_at(clear.path, (start, 0), (end + 1, 0), ""),
             fixes.edit_at(clear.path, (last + 1, 0), (last + 1, 0), body)))


def _moved_before(fixes: FixWriter, clear: Site, backward: Site
                  ) -> tuple[Site, tuple[Edit, ...]] | None:
    """The clear's statement moved before the statement of the ``backward()`` whose gradient
    it lost, where that statement comes first in the same block; else ``None``."""
    if clear.path != backward.path or backward.line >= clear.line:
        return None
    parsed = S.syntax_tree(clear.path)
    a, b = S.statement_at(clear.path, clear.line), S.statement_at(clear.path, backward.line)
    if parsed is None or a is None or b is None:
        return None
    parents = _parents(parsed[0])
    if id(a[0]) not in parents or id(b[0]) not in parents or \
            parents[id(a[0])][1] is not parents[id(b[0])][1]:
        return None
    edits = fixes.move_before(clear.path, clear.line, backward.line)
    return (Site(clear.path, clear.line, None), tuple(edits)) if edits else None


def _alone(lines: list[str], stmt: ast.stmt) -> bool:
    """Whether ``stmt`` has its lines to itself (first on its first line, nothing but a
    comment after it on its last)."""
    first = lines[stmt.lineno - 1]
    end = stmt.end_lineno or stmt.lineno
    rest = lines[end - 1].rstrip("\r\n").encode("utf-8")[stmt.end_col_offset or 0:]
    return stmt.col_offset == len(first) - len(first.lstrip()) and \
        rest.decode("utf-8", "replace").strip()[:1] in ("", "#")
