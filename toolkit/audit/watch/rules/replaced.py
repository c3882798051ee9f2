"""A parameter replaced after the optimizer that holds it was built: the script assigns a NEW
``nn.Parameter`` to a module's attribute (``self.codebook = nn.Parameter(fresh)``,
``layer.weight = nn.Parameter(w)``) while an optimizer holds the one it replaces. The forward
reads the new tensor and the backward gives it gradient, but no optimizer holds it: it never
trains. The optimizer steps the old one, which no loss reaches any more.

Found when it spoils an update: at the end of an audited iteration in which the new tensor got
gradient that no optimizer holds, while an optimizer still holds the old one. One failure per
replacing line (a loop over layers is one), at that line and the optimizer's, about the old
tensors (the optimizer's keys) and named by the new ones. Its edit writes the new values INTO
the existing parameter, as the published code does (Glow's ActNorm initialisation, open_lth's
rewind, the dead-code restarts of Jukebox and vqtorch): ``self.codebook.copy_(fresh)`` where the
line runs under ``no_grad``, ``layer.weight.data.copy_(w)`` where it does not. The optimizer
keeps its tensor and its state. A script that replaces its parameters before it builds the
optimizer, or that builds a new optimizer over the new ones, is no finding: an optimizer holds
the tensors the loss trains."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch
from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes import script_edits as E
from toolkit.audit.record import syntax as S
from toolkit.audit.result import plural
from toolkit.audit.watch.frames import Site, site_of, user_frame
from toolkit.audit.watch.state import WatchState
from toolkit.audit.watch.tensors import keyed

__all__ = ["Replacement", "noted", "old_tensors", "replaced"]


@dataclass(frozen=True)
class Replacement:
    """``module.name``, held by an optimizer as ``old``, set to ``new`` at ``site``; ``no_grad``:
    whether gradient recording was off there."""

    module: nn.Module
    name: str
    old: torch.Tensor
    new: torch.Tensor
    site: Site | None
    no_grad: bool

    def current(self) -> bool:
        """Whether the module still holds the new tensor there."""
        return self.module._parameters.get(self.name) is self.new


def noted(w: WatchState, module: nn.Module, name: str, new: object) -> None:
    """A parameter registered on ``module`` as ``name`` (``Module.__setattr__`` with a
    ``Parameter``, or ``register_parameter``): kept when it replaces one an optimizer holds.
    Called by torch's parameter registration hook, before the module holds ``new``."""
    old = module._parameters.get(name)
    if old is None or old is new or not isinstance(new, torch.Tensor) or not w.optimizers:
        return
    earlier = w.replaced.get((id(module), name))
    if earlier is not None and earlier.new is old:
        old = earlier.old   # replaced again (a restart every few steps): the optimizer's own
    if not any(p is old for o in w.optimizers for g in o.param_groups for p in g["params"]):
        return
    frame = user_frame(1)
    w.replaced[(id(module), name)] = Replacement(
        module, name, old, new, site_of(frame) if frame is not None else None,
        not torch.is_grad_enabled())


def _spoiling(w: WatchState, stepped: dict[int, int]) -> list[Replacement]:
    """The replacements whose new tensor the module still holds, no optimizer steps, and a loss
    of this iteration reached, while an optimizer still holds the old one."""
    return [r for r in w.replaced.values() if r.current() and id(r.new) not in stepped
            and w.ledger.live.get(id(r.new)) and id(r.old) in stepped]


def old_tensors(w: WatchState, stepped: dict[int, int]) -> set[int]:
    """The ids of the old tensors of :func:`_spoiling` replacements: no loss reaches them, and
    the replacement's finding says why (the dead rule leaves them to it)."""
    return {id(r.old) for r in _spoiling(w, stepped)} if w.replaced else set()


def replaced(w: WatchState, stepped: dict[int, int]) -> set[int]:
    """At the end of an audited iteration: a failure per replacing line (see the module's
    docstring). Returns the ids of the new tensors it is about, which the rule of tensors no
    optimizer steps leaves to it."""
    spoiling = _spoiling(w, stepped) if w.replaced else []
    if not spoiling:
        return set()
    names = w.names()
    by_site: dict[Site | None, list[Replacement]] = {}
    for r in spoiling:
        by_site.setdefault(r.site, []).append(r)
    for site, found in by_site.items():
        index = stepped[id(found[0].old)]
        opt = w.optimizers[index]
        keys = dict(keyed(index, opt))
        old_keys = tuple(k for k, p in keys.items() if any(p is r.old for r in found))
        shown = tuple(names.get(id(r.new), r.name) for r in found)
        built = w.built_at.get(id(opt))
        opt_text = w.optimizer_text(index, built) if built is not None else None
        opt_text = opt_text or "the optimizer"
        edit = in_place_copy(site, found[0].no_grad) if site is not None else None
        srcs = {s for r in found for s in w.ledger.live[id(r.new)] if s.site is not None}
        at = tuple(s.shown() for s in (site, built) if s is not None) + tuple(
            sorted({s.site.shown() for s in srcs}))
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{plural(len(found), 'tensor')} the loss trains ({', '.join(shown)}) "
            f"{'is' if len(found) == 1 else 'are'} in no optimizer: " + (f"`{site.text()}` at {site}" if site is not None else "the script")
            + f" put new parameters in place of those {opt_text} holds, after it was built; "
            f"it steps the old ones, which no loss reaches any more",
            old_keys, shown, at, (edit,) if edit is not None else (),
            advice="write the new values into the parameter the optimizer holds "
                   "(with torch.no_grad(): param.copy_(values)), or build the optimizer after "
                   "the replacement", step=w.step_events - 1, concerned=old_keys))
    return {id(r.new) for r in spoiling}


def in_place_copy(site: Site, no_grad: bool) -> Edit | None:
    """The replacing assignment at ``site`` (``X = nn.Parameter(v)``, ``X = p``) made a copy
    into the parameter ``X`` holds: ``X.copy_(v)`` where it runs under ``no_grad``, else
    ``X.data.copy_(v)``. ``None`` when the line is no such assignment of one target."""
    found = S.statement_at(site.path, site.line)
    if found is None:
        return None
    st, text = found
    if not isinstance(st, ast.Assign) or len(st.targets) != 1 or \
            not isinstance(st.targets[0], ast.Attribute):
        return None
    value = st.value
    if isinstance(value, ast.Call) and _names_parameter(value.func) and len(value.args) == 1 \
            and all(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                    and k.value.value is True for k in value.keywords):
        value = value.args[0]
    into = S.segment(text, st.targets[0]) + ("" if no_grad else ".data")
    return E.edit_at(site.path, (st.lineno, st.col_offset),
                     (st.end_lineno or st.lineno, st.end_col_offset or 0),
                     f"{into}.copy_({S.segment(text, value)})")


def _names_parameter(func: ast.expr) -> bool:
    """Whether a call's function is ``Parameter`` (``nn.Parameter``, ``torch.nn.Parameter``)."""
    return (isinstance(func, ast.Name) and func.id == "Parameter") or (
        isinstance(func, ast.Attribute) and func.attr == "Parameter")
