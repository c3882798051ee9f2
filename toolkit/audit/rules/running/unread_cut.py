"""A cut nothing reads (``void_cut``): a ``.detach()`` whose result the script drops, so the
value it was written to cut goes on into the loss whole. Two forms: the call as a statement of
its own (``x.detach()``, where ``x = x.detach()`` was meant), and an assignment to a loop's own
variable that nothing reads afterwards (``for f in features: f = f.detach()``: the next pass
rebinds ``f``, the list keeps the values with their graph), where Learning Loss for Active
Learning (Yoo & Kweon 2019; Mephisto405/Learning-Loss-for-Active-Learning, main.py
``train_epoch``) writes ``features[k] = features[k].detach()`` to keep the loss-prediction
module from training the backbone.

Judged at a ``backward()`` whose loss reaches, through the cut's own input (the value made
before the cut, read whole), tensors an optimizer holds: the script wrote a cut there, and the
gradient passes anyway. The failure is at the cut's line; its edit writes the cut where it takes
effect, where that is plain: ``x = x.detach()``, or the loop replaced by ``features =
[f.detach() for f in features]`` (a list of the same values, cut). A cut whose input no loss
reads, or whose input reaches nothing an optimizer holds, changes nothing: no finding."""

from __future__ import annotations

import ast

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import read_graph
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import keyed
from toolkit.audit.result import plural
from toolkit.audit.rules.running.state import WatchState

__all__ = ["unread"]


def unread(w: WatchState, nodes: set[int], held: dict[int, int], site: Site | None) -> None:
    """At an audited ``backward()`` whose graph holds the nodes ``nodes`` (by ``id``), with
    ``held`` the tensors an optimizer holds: the cuts made in this loss's forward whose result
    nothing reads and whose input this loss reads whole, reaching tensors in ``held``."""
    since = w.events - 1            # this backward's own forward: after the previous event
    names = w.names()
    by_site: dict[Site, list] = {}
    for node, cut, _, event in w.detaches:
        if event == since and id(node) in nodes and cut not in w.unread_judged:
            by_site.setdefault(cut, []).append(node)
    for cut, cut_nodes in by_site.items():
        w.unread_judged.add(cut)
        reached = [t for k, t in read_graph(cut_nodes).leaves.items() if k in held]
        found = S.unread_cut(cut.path, cut.line) if reached else None
        if found is None:
            continue
        statement, text, fix = found
        w.meant.pop(cut, None)   # a finding, not a cut taken as meant
        shown = tuple(names.get(id(t), "?") for t in reached)
        ids = {id(t) for t in reached}
        keys = tuple(k for i, opt in enumerate(w.optimizers) for k, p in keyed(i, opt)
                     if id(p) in ids)
        bound = statement.target if isinstance(statement, ast.For) else None
        what = (f"binds its `.detach()` to `{S.segment(text, bound)}`, which the next pass of "
                f"the loop rebinds before anything reads it" if bound is not None else
                "drops the result of its `.detach()`")
        edits = () if fix is None else (w.fixes.edit_at(
            cut.path, (statement.lineno, statement.col_offset),
            (statement.end_lineno or statement.lineno, statement.end_col_offset or 0), fix),)
        w.add(ScriptFinding(
            "void_cut", w.iteration,
            f"the cut at {cut} {what}: it cuts nothing, and {w.loss_label(site)} "
            f"(backward at {site}) reaches {plural(len(reached), 'tensor')} an optimizer "
            f"holds through the value it was written to cut",
            shown, shown, tuple(s.shown() for s in (cut, site) if s is not None), edits,
            advice=fix or f"assign the cut where it is read: {S.segment(text, statement)}",
            concerned=keys, step=w.step_events))
