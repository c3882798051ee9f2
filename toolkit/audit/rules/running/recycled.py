"""An estimate fed back within one iteration without a cut (``carried``): self-conditioning or
recycling whose earlier pass stays in the graph (see :mod:`.recycling`)."""

from __future__ import annotations

import ast
from collections.abc import Sequence

import torch

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import places
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import keyed
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.rules.running.recycling import Pass
from toolkit.audit.rules.running.state import WatchState
from toolkit.lens.graph_walk import walk

__all__ = ["recycled"]


def _compared(roots: Sequence[torch.Tensor]) -> set[int]:
    """The nodes the loss compares: a walk from it that stops at the operations reading a
    tensor of their own (a layer: what lies below is what the layer computes from), as
    :func:`~toolkit.audit.rules.running.feedback.feedbacks` reads them."""
    def expand(node: object) -> bool:
        return not any(hasattr(n, "variable") for n, _ in node.next_functions  # type: ignore[attr-defined]
                       if n is not None)

    return {id(node) for _, node, _, _ in walk(places(t.grad_fn for t in roots), expand=expand)}


def recycled(w: WatchState, roots: Sequence[torch.Tensor], site: Site | None) -> None:
    """At a backward: for each call of the iteration whose output the loss compares, an
    argument computed from the output of an earlier call of the same network on the same
    input that the loss does not compare (the estimate, fed back without a cut). A failure
    when that argument, on some iteration, held a constant in a call the loss compared;
    until then it waits (the iterations that condition on nothing may come later)."""
    r = w.recycling
    passes = [p for p in r.passes if p.trains]   # an estimate is a network's that trains
    if not passes:
        return
    compared = _compared(roots)
    seen = [(p, any(id(n) in compared for n in p.outs)) for p in passes]
    for p, is_compared in seen:
        if is_compared:
            for k, slot in enumerate(p.slots):
                if slot is None:
                    r.constant.add((id(p.module), k))
            r.constant.add((id(p.module), -len(p.slots)))   # the arguments left out
    found: dict[tuple, tuple[int, tuple[int, int], ScriptFinding]] = {}
    for later, is_compared in seen:
        if not is_compared:
            continue
        earlier = [p for p, c in seen if not c and p.module is later.module
                   and p.order < later.order]
        for k, slot in enumerate(later.slots if earlier else ()):
            if not slot:
                continue
            sources = _sources(later, k, slot, [p for p in earlier if later.same_input(p, k)])
            if not sources:
                continue
            finding = _finding(w, later, k, sources, site)
            size = sum(1 for _ in later.module.parameters())
            where = tuple(sorted({(p.site.path, p.site.line) for p in sources}))
            if where not in found or found[where][0] < size:
                found[where] = (size, (id(later.module), k), finding)
    for _, key, finding in found.values():
        if _constant(r.constant, key):
            w.add(finding)
        else:
            waiting = r.pending.setdefault(key, [])
            if all(f.key != finding.key for f in waiting):
                waiting.append(finding)
    for key in [k for k in r.pending if _constant(r.constant, k)]:
        for finding in r.pending.pop(key):
            w.add(finding)


def _constant(constant: set[tuple[int, int]], key: tuple[int, int]) -> bool:
    """Whether argument ``key[1]`` of network ``key[0]`` was a constant (or left out) in a call
    a loss compared."""
    module, k = key
    return (module, k) in constant or any(m == module and n < 0 and -n <= k
                                          for m, n in constant)


def _sources(later: Pass, k: int, slot: tuple, earlier: list[Pass]) -> list[Pass]:
    """The calls among ``earlier`` whose output the ``k``-th argument of ``later`` (its nodes
    ``slot``) is computed from."""
    if not earlier:
        return []
    outs = {id(n) for p in earlier for n in p.outs}
    reached = {id(node) for _, node, _, first in walk(places(slot),
                                                      expand=lambda n: id(n) not in outs)
               if first and id(node) in outs}
    return [p for p in earlier if any(id(n) in reached for n in p.outs)]


def _finding(w: WatchState, later: Pass, k: int, sources: list[Pass],
             site: Site | None) -> ScriptFinding:
    called = next((name for m, name in w.called_networks() if m is later.module), "a network")
    found = S.call_at(later.site.path, later.site.span)
    arg = None
    if found is not None and k < len(found[0].args) and \
            not isinstance(found[0].args[k], ast.Starred):
        arg = S.segment(found[1], found[0].args[k]) or None
    what = f"`{arg}`" if arg else f"argument {k + 1}"
    own = {id(p) for p in later.module.parameters()}
    held = [(key, p) for i, o in enumerate(w.optimizers) for key, p in keyed(i, o)
            if id(p) in own]
    names = w.names()
    made = list(dict.fromkeys(p.site for p in sources))
    edits: list[Edit] = []
    for s in made:
        edits += _cut(w.fixes, s, later.site)
    return ScriptFinding(
        "carried", w.iteration,
        f"`{called}` reads its own estimate: {what}, an argument of its call at "
        f"{later.site} whose output {w.loss_label(site)} (backward at {site}) compares, is "
        f"computed with gradients from the output of its call at "
        f"{', '.join(str(s) for s in made)}, which no loss compares; the loss also trains "
        f"`{called}` through the pass that made the estimate. Other iterations give that "
        f"argument a constant (the network learns to predict without an estimate too): a "
        f"self-conditioning or recycled estimate is an input, made under torch.no_grad()",
        tuple(key for key, _ in held), tuple(names.get(id(p), "?") for _, p in held),
        tuple(s.shown() for s in made) + (later.site.shown(),) + ((site.shown(),) if site else ()),
        tuple(edits),
        advice="make the estimate under torch.no_grad() (or .detach() it where it is passed "
               "on): the later pass reads its value, not its graph",
        step=w.step_events, concerned=("*",))


def _cut(fixes: FixWriter, made: Site, later: Site) -> list[Edit]:
    """The statement that makes the estimate at ``made`` run under ``torch.no_grad()``; where
    that statement cannot be wrapped alone (it shares a line, or holds the later call too),
    the call's output ``.detach()``-ed. None where both passes are one call in a loop (its
    ``.detach()`` would cut the later pass too)."""
    if (made.path, made.span) == (later.path, later.span):
        return []
    parsed = S.syntax_tree(made.path)
    detached = fixes.detach_call(made.path, made.span)
    fallback = [detached] if detached is not None else []
    if parsed is None or made.span is None:
        return fallback
    tree, text = parsed
    first, last = made.span[0], made.span[1]
    holder = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Expr) and \
                node.lineno <= first and (node.end_lineno or node.lineno) >= last:
            if holder is None or node.lineno >= holder.lineno:
                holder = node
    if holder is None:
        return fallback
    end = holder.end_lineno or holder.lineno
    lines = text.splitlines(keepends=True)
    indent = S.indent_of(text, holder.lineno)
    rest = lines[end - 1].rstrip("\r\n").encode("utf-8")[holder.end_col_offset or 0:]
    segment = S.segment(text, holder)
    if (holder.col_offset != len(indent) or rest.decode("utf-8", "replace").strip()[:1]
            not in ("", "#") or holder.lineno <= later.line <= end or '"""' in segment
            or "'''" in segment):
        return fallback
    name = next((a.asname or a.name for node in tree.body if isinstance(node, ast.Import)
                 for a in node.names if a.name == "torch"), None)
    edits = []
    if name is None:
        name = "torch"
        imported = fixes.import_edit(made.path, "torch")
        if imported is not None:
            edits.append(imported)
    body = "".join(f"    {x}" if x.strip() else x for x in lines[holder.lineno - 1:end])
    if not body.endswith("\n"):
        body += "\n"
    edits.append(fixes.edit_at(made.path, (holder.lineno, 0), (end + 1, 0),
                           f"{indent}with {name}.no_grad():\n{body}"))
    return edits
