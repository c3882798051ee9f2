"""A freeze meant to end that never ended (``never_trained``): tensors an optimizer holds and a
loss's gradient reaches, whose gradient the script's code cleared under a condition on the
run's progress, and that no step of the whole run found with a gradient. Published methods
freeze a part for a first stretch of the run and then train it (SwAV cancels its prototypes'
gradients while ``iteration < freeze_prototypes_niters``, facebookresearch/swav main_swav.py;
DINO's last layer while ``epoch < freeze_last_layer``, a guard clause in a helper): a condition
on a loop's counter says the clear is meant for some iterations only
(:func:`~toolkit.audit.record.syntax.progress_conditions`). Where it held at every step of a
run that ended by itself (it counts the epoch for the iteration, the batch within the epoch
for the step), the part never trained. The finding is at the clear and at those conditions:
which of them is wrong, only the method says, so no edit is made.

Not this: a clear with no such condition (a part kept fixed on purpose, or under a flag set
before the loop: information, ``wasted``); a freeze that ended during the run (a step found
the gradient); a run the watch stopped (what came after was not seen: the closing line says
so)."""

from __future__ import annotations

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.result import plural
from toolkit.audit.watch.frames import Site
from toolkit.audit.watch.state import WatchState
from toolkit.audit.watch.tensors import keyed

__all__ = ["check", "unended"]


def _never_stepped(w: WatchState) -> dict[int, str]:
    """The tensors an optimizer holds and a loss reached that no step found with a gradient,
    by ``id``, with their keys."""
    return {id(p): k for i, o in enumerate(w.optimizers) for k, p in keyed(i, o)
            if p.requires_grad and id(p) in w.reached_at and id(p) not in w.stepped_with_grad}


def _frozen(w: WatchState, never: dict[int, str]):
    """Each clear of tensors of ``never`` under conditions: its lines (innermost first), the
    keys it cleared, and the conditions' ``(file, line)``."""
    for lines, cleared in w.clearing.items():
        keys = [key for key in never if key in cleared]
        conditions = S.progress_conditions(lines)
        if keys and conditions:
            yield lines, keys, conditions


def _ifs(conditions: list[tuple[str, int]]) -> str:
    return ", ".join(f"`{Site(p, n, None).text().rstrip(':')}` ({S.line_named(p, n)})"
                     for p, n in conditions)


def unended(w: WatchState) -> str | None:
    """The closing line of a run the watch stopped while a freeze under a condition held
    (whether it ends was not seen); ``None`` where none held."""
    if not w.stopped:
        return None
    found = list(_frozen(w, _never_stepped(w)))
    if not found:
        return None
    ifs = _ifs([c for _, _, conditions in found for c in conditions])
    return (f"whether the freeze under {ifs} ends: the script was stopped while it held (the "
            f"tensors it clears had not trained yet); --watch EVERY runs it to its end")


def check(w: WatchState) -> None:
    """At the end of a run that ended by itself, after two steps or more: one failure per
    conditional clear of tensors that never trained."""
    if w.stopped or w.step_events < 2:
        return
    never = _never_stepped(w)
    names = w.names() if never else {}
    for lines, keys, conditions in _frozen(w, never):
        at = tuple(Site(p, n, None).shown() for p, n in [lines[0], *conditions])
        ifs = _ifs(conditions)
        w.add(ScriptFinding(
            "never_trained", w.iteration,
            f"{plural(len(keys), 'tensor')} an optimizer holds and a loss reaches never "
            f"trained: the script cleared {'its' if len(keys) == 1 else 'their'} gradient "
            f"under {ifs} before every one of the "
            f"run's {w.step_events} steps, so the freeze it stands for never ended",
            tuple(never[k] for k in keys), tuple(names.get(k, never[k]) for k in keys), at,
            advice="check what the condition counts and against what (an epoch for an "
                   "iteration, a comparison the wrong way): it held at every step of the run",
            step=w.step_events - 1, concerned=tuple(never[k] for k in keys)))
