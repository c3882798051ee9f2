"""A freeze meant to end that never ended (``never_trained``): tensors an optimizer holds whose
gradient the script's code cleared under a condition on the run's progress (a loss reaching
them), and that no step of the whole run found with a gradient; or that the script switched off
(``requires_grad_(False)``) under such a condition, and that no step found requiring one.
Published methods freeze a part for a first stretch of the run and then train it (SwAV cancels
its prototypes' gradients while ``iteration < freeze_prototypes_niters``, facebookresearch/swav
main_swav.py; DINO's last layer while ``epoch < freeze_last_layer``, a guard clause in a
helper): a condition on a loop's counter says the clear is meant for some iterations only
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
from toolkit.audit.record.frames import Site
from toolkit.audit.record.tensors import keyed
from toolkit.audit.result import plural
from toolkit.audit.rules.running.state import WatchState

__all__ = ["check", "unended"]


def _frozen(w: WatchState):
    """Each clear or freeze the script made under conditions on the run's progress, of tensors
    an optimizer holds that never trained: its lines (innermost first), those tensors' keys by
    ``id``, the conditions' ``(file, line)``, and what it did to them. Never trained: a loss
    reached them and no step found them with a gradient (a clear), or no step found them
    requiring one (``requires_grad_(False)``); ``how`` has a ``{}`` for them."""
    held = [(k, p) for i, o in enumerate(w.optimizers) for k, p in keyed(i, o)]
    cleared = {id(p): k for k, p in held if p.requires_grad and id(p) in w.reached_at
               and id(p) not in w.stepped_with_grad}
    switched = {id(p): k for k, p in held if id(p) not in w.trainable_seen}
    for sites, never, how in ((w.clearing, cleared, "cleared the gradient of {}"),
                              (w.switching, switched, "switched {} off (requires_grad_(False))")):
        for lines, tensors in sites.items():
            keys = {key: never[key] for key in never if key in tensors}
            conditions = w.progress_conditions(lines) if keys else []
            if conditions:
                yield lines, keys, conditions, how


def _ifs(conditions: list[tuple[str, int]]) -> str:
    return ", ".join(f"`{Site(p, n, None).text().rstrip(':')}` ({S.line_named(p, n)})"
                     for p, n in conditions)


def unended(w: WatchState) -> str | None:
    """The closing line of a run the watch stopped while a freeze under a condition held
    (whether it ends was not seen); ``None`` where none held."""
    if not w.stopped:
        return None
    found = list(_frozen(w))
    if not found:
        return None
    ifs = _ifs([c for _, _, conditions, _ in found for c in conditions])
    return (f"whether the freeze under {ifs} ends: the script was stopped while it held (the "
            f"tensors it freezes had not trained yet); --watch EVERY runs it to its end")


def check(w: WatchState) -> None:
    """At the end of a run that ended by itself, after two steps or more: one failure per
    clear or freeze under conditions on the run's progress of tensors that never trained."""
    if w.stopped or w.step_events < 2:
        return
    found = list(_frozen(w))
    names = w.names() if found else {}
    for lines, keys, conditions, how in found:
        at = tuple(Site(p, n, None).shown() for p, n in [lines[0], *conditions])
        w.add(ScriptFinding(
            "never_trained", w.iteration,
            f"{plural(len(keys), 'tensor')} an optimizer holds never trained: the script "
            f"{how.format('it' if len(keys) == 1 else 'them')} under {_ifs(conditions)} "
            f"before every one of the run's {w.step_events} steps, so the freeze it stands for "
            f"never ended",
            tuple(keys.values()), tuple(names.get(k, keys[k]) for k in keys), at,
            advice="check what the condition counts and against what (an epoch for an "
                   "iteration, a comparison the wrong way): it held at every step of the run",
            step=w.step_events - 1, concerned=tuple(keys.values())))
