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
the tensors the loss trains.

The same holds where no module holds the tensor: a plain name, a list's element or a plain
object's attribute rebound to a new leaf (``delta = delta.detach().clamp(-e, e)
.requires_grad_()``, ``codes[i] = nn.Parameter(codes[i].detach() * s)``, ``z =
nn.Parameter(...)`` in a helper that returns it). No hook sees a name rebound, so the rule
pairs what it can see: a leaf made (``nn.Parameter(...)``, ``.requires_grad_()``) by a line of
the script after an optimizer was built, which a loss of the iteration reached and no optimizer
holds, and as many tensors of the same shape an optimizer holds that no loss reached. The
finding is at the line that made the leaf, with the same edit (``delta.data.copy_(delta.detach()
.clamp(-e, e))``)."""

from __future__ import annotations

import ast
import weakref

import torch
from torch import nn

from toolkit.audit.edit import Edit
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import Site, scope_lines, site_of, user_frame
from toolkit.audit.record.tensors import keyed
from toolkit.audit.result import plural
from toolkit.audit.rules.running.fix_writer import FixWriter
from toolkit.audit.rules.running.state import Replacement, WatchState

__all__ = ["made", "noted", "noted_module", "old_tensors", "replaced", "state_copy"]


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
        not torch.is_grad_enabled(), _spoils(w))


def noted_module(w: WatchState, module: nn.Module, name: str, new: object) -> None:
    """A submodule registered on ``module`` as ``name`` in place of one whose parameters an
    optimizer holds (DeepCluster's top layer started again as a new ``nn.Linear`` after its
    optimizer was built): each of its parameters is replaced by the new one of the same name
    and shape. Called by torch's module registration hook, before ``module`` holds ``new``."""
    old = module._modules.get(name)
    if not isinstance(old, nn.Module) or not isinstance(new, nn.Module) or old is new or \
            not w.optimizers:
        return
    held = w.stepped_map()
    fresh = dict(new.named_parameters())
    frame = user_frame(1)
    site = site_of(frame) if frame is not None else None
    for p_name, before in old.named_parameters():
        key = (id(module), f"{name}.{p_name}")
        earlier = w.replaced.get(key)
        if earlier is not None and earlier.new is before:
            # started again once more: the optimizer's is the first; the one it replaces now
            # may hold the gradient of the iteration that ends here, the replacement's too
            w.superseded.add(id(before))
            before = earlier.old
        after = fresh.get(p_name)
        if id(before) in held and isinstance(after, torch.Tensor) and \
                after.shape == before.shape:
            w.replaced[key] = Replacement(module, f"{name}.{p_name}", before, after, site,
                                          not torch.is_grad_enabled(), _spoils(w),
                                          swap=(name, new))


def _spoiling(w: WatchState, stepped: dict[int, int]) -> list[Replacement]:
    """The replacements whose new tensor the module still holds, no optimizer steps, and a loss
    of this iteration reached, while an optimizer still holds the old one."""
    return [r for r in w.replaced.values() if r.current() and id(r.new) not in stepped
            and w.ledger.live.get(id(r.new)) and id(r.old) in stepped]


def made(w: WatchState, tensor: torch.Tensor) -> None:
    """A leaf made to require grad (``nn.Parameter(...)``, ``.requires_grad_()``) once an
    optimizer exists: kept, weakly, with the user's line that made it, for :func:`_rebound`."""
    if not w.optimizers or not tensor.is_leaf:
        return
    frame = user_frame(1)
    if frame is not None:
        w.made_leaves[id(tensor)] = (weakref.ref(tensor), site_of(frame),
                                     not torch.is_grad_enabled(), _spoils(w))
        w.made_in[id(tensor)] = (len(w.optimizers), scope_lines(frame))


def _spoils(w: WatchState) -> int:
    """The iteration whose update a replacement made now spoils first: the next one where the
    iteration's step has run (a rewind between two loops, a restart after a step), else this
    one (before the iteration's first ``backward()``). The iteration the rule finds it in may
    be later: a new loop's first pass is not audited."""
    return w.iteration + (1 if w.events and w.last_step_event == w.events else 0)


def _rebound(w: WatchState, stepped: dict[int, int], skip: set[int]
             ) -> dict[Site, list[tuple[torch.Tensor, torch.Tensor, bool, int]]]:
    """Leaves the script made since an optimizer was built, held by no module the script
    calls, that a loss of this iteration reached and no optimizer holds (``skip``: those a
    module's replacement explains), paired, by shape and dtype in the optimizers' order, with
    tensors an optimizer built before the leaf was made holds that no loss reached: by the line
    that made them, ``(new, old, made under no_grad, iteration
    spoiled)``. A line whose
    leaves pair with none is left out (a perturbation of the input, trained by hand)."""
    # held by an optimizer, even one whose name now holds another (the last perturbation of
    # an attack that builds its own SGD over each new one): no rebinding left it out
    held = w.stepped_map()
    news: dict[Site, list[tuple[torch.Tensor, bool, int, int]]] = {}
    for key, (ref, site, no_grad, spoils) in list(w.made_leaves.items()):
        t = ref()
        if t is None:
            del w.made_leaves[key]
        elif key not in held and key not in skip and w.ledger.live.get(key) and \
                w.owner(key) is None:   # a module's: its replacement is noted() apart
            news.setdefault(site, []).append((t, no_grad, spoils,
                                              w.made_in.get(key, (len(w.optimizers),))[0]))
    if not news:
        return {}
    unreached = [(i, p) for i, o in enumerate(w.optimizers) for g in o.param_groups
                 for p in g["params"] if id(p) in stepped and not w.ledger.live.get(id(p))]
    out: dict[Site, list[tuple[torch.Tensor, torch.Tensor, bool, int]]] = {}
    paired: set[int] = set()
    for site, leaves in news.items():
        for t, no_grad, spoils, built in leaves:
            # the tensor it replaced is held by an optimizer built before it was made
            old = next((p for i, p in unreached if i < built and id(p) not in paired
                        and p.shape == t.shape and p.dtype == t.dtype), None)
            if old is not None:
                paired.add(id(old))
                out.setdefault(site, []).append((t, old, no_grad, spoils))
    return out


def old_tensors(w: WatchState) -> set[int]:
    """The ids of the old tensors of :func:`_spoiling` replacements and :func:`_rebound`
    leaves: no loss reaches them, and the replacement's finding says why (the dead rule leaves
    them to it). Nothing is looked at in a run that replaced nothing."""
    if not w.replaced and not w.made_leaves:
        return set()
    stepped = w.stepped_map()
    out = {id(r.old) for r in _spoiling(w, stepped)} if w.replaced else set()
    if w.made_leaves:
        out |= {id(old) for pairs in _rebound(w, stepped, set()).values()
                for _, old, _, _ in pairs}
    return out


def replaced(w: WatchState, stepped: dict[int, int]) -> set[int]:
    """At the end of an audited iteration: a failure per replacing line (see the module's
    docstring). Returns the ids of the new tensors it is about, which the rule of tensors no
    optimizer steps leaves to it."""
    spoiling = _spoiling(w, stepped) if w.replaced else []
    if not spoiling and not w.made_leaves:
        return set(w.superseded)
    found: dict[Site | None, list[tuple[torch.Tensor, torch.Tensor, bool, int]]] = {}
    for r in spoiling:
        found.setdefault(r.site, []).append((r.new, r.old, r.no_grad, r.spoils))
    swapped = {r.site for r in spoiling if r.swap is not None}
    names = w.names()
    shown_of = {id(r.new): names.get(id(r.new), r.name) for r in spoiling}
    if w.made_leaves:
        for site, pairs in _rebound(w, stepped, {id(r.new) for r in spoiling}).items():
            found.setdefault(site, []).extend(pairs)
            for new, *_ in pairs:
                shown_of[id(new)] = (w.bound_name(new)
                                     or S.assigned_name(site.path, site.line) or "?")
    for site, pairs in found.items():
        if site not in w.replacing_found:
            w.replacing_found.add(site)
            _report(w, site, pairs, stepped, shown_of, site in swapped)
    return {id(new) for pairs in found.values() for new, *_ in pairs} | w.superseded


def _report(w: WatchState, site: Site | None,
            pairs: list[tuple[torch.Tensor, torch.Tensor, bool, int]], stepped: dict[int, int],
            shown_of: dict[int, str], swapped: bool = False) -> None:
    """One failure for the new tensors one line made in place of ``pairs``' old ones
    (``swapped``: by a new submodule in place of the one the optimizer holds)."""
    index = stepped[id(pairs[0][1])]
    opt = w.optimizers[index]
    old_keys = tuple(k for k, p in keyed(index, opt) if any(p is old for _, old, *_ in pairs))
    shown = tuple(dict.fromkeys(shown_of[id(new)] for new, *_ in pairs))
    built = w.built_at.get(id(opt))
    opt_text = (w.optimizer_text(index, built) if built is not None else None) or \
        "the optimizer"
    # copies cut from parameters (MAML's fast weights made as
    # ``p.detach().clone().requires_grad_()``): nothing replaced them, the copies only lost
    # their graph, which the edit keeps
    copied = None if site is None or swapped or not all(
        isinstance(old, nn.Parameter) for _, old, *_ in pairs) else kept_copy(w.fixes, site)
    edit = None if site is None else copied or (
        state_copy(w.fixes, site) if swapped else in_place_copy(w.fixes, site, pairs[0][2]))
    srcs = {s for new, *_ in pairs for s in w.ledger.live[id(new)] if s.site is not None}
    at = tuple(s.shown() for s in (site, built) if s is not None) + tuple(
        sorted({s.site.shown() for s in srcs}))
    n = len(pairs)
    # found at the end of this iteration; first there at the update after the replacement
    iteration = min(w.iteration, *(spoils for *_, spoils in pairs))
    w.add(ScriptFinding(
        "unstepped", iteration,
        f"{plural(n, 'tensor')} the loss trains ({', '.join(shown)}) "
        f"{'is' if n == 1 else 'are'} in no optimizer: "
        + (f"`{site.text()}` at {site}" if site is not None else "the script")
        + (f" made {'them' if n > 1 else 'it'} as {'copies' if n > 1 else 'a copy'} cut "
           f"from {'those' if n > 1 else 'the one'} {opt_text} holds: the loss's gradient "
           f"stops at the {'copies' if n > 1 else 'copy'} and never reaches what it steps"
           if copied is not None else
           f" put {'new tensors' if n > 1 else 'a new tensor'} in place of "
           f"{'those' if n > 1 else 'the one'} {opt_text} holds, after it was built; it "
           f"steps the old {'ones' if n > 1 else 'one'}, which no loss reaches any more"),
        old_keys, shown, at, (edit,) if edit is not None else (),
        advice="make the copies with their graph (`p.clone()`), so that the loss's gradient "
               "reaches the tensors the optimizer holds" if copied is not None else
               "write the new values into the tensor the optimizer holds "
               "(with torch.no_grad(): param.copy_(values)), or build the optimizer after "
               "the replacement", step=w.step_events - 1, concerned=old_keys))


def kept_copy(fixes: FixWriter, site: Site) -> Edit | None:
    """The leaf made at ``site`` as a cut copy of a tensor, ``p.detach().clone()
    .requires_grad_()`` (``.clone()`` or ``.detach()`` in either order), made a copy that keeps
    its graph: ``p.clone()``. ``None`` where the statement makes no such leaf."""
    found = S.statement_at(site.path, site.line)
    if found is None:
        return None
    st, text = found
    for node in ast.walk(st):
        base = S.made_trainable(node) if isinstance(node, ast.expr) else None
        cut = False
        if base is None:
            continue
        while isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and \
                base.func.attr in ("detach", "clone") and not base.args and not base.keywords:
            cut = cut or base.func.attr == "detach"
            base = base.func.value
        if cut:
            return fixes.edit_at(site.path, (node.lineno, node.col_offset),
                                 (node.end_lineno or node.lineno, node.end_col_offset or 0),
                                 f"{S.segment(text, base)}.clone()")
    return None


def in_place_copy(fixes: FixWriter, site: Site, no_grad: bool) -> Edit | None:
    """The replacing assignment at ``site`` (``X = nn.Parameter(v)``, ``X =
    v.requires_grad_()``, ``X = p``) made a copy into the tensor ``X`` holds: ``X.copy_(v)``
    where it runs under ``no_grad``, else ``X.data.copy_(v)`` (a trailing ``.clone()`` of ``v``
    dropped: the copy is one). ``None`` when the line is no such assignment of one target (an
    attribute, an element, a name)."""
    found = S.statement_at(site.path, site.line)
    if found is None:
        return None
    st, text = found
    if not isinstance(st, ast.Assign) or len(st.targets) != 1 or \
            not isinstance(st.targets[0], ast.Attribute | ast.Subscript | ast.Name):
        return None
    value = st.value
    if isinstance(value, ast.Call) and _names_parameter(value.func) and len(value.args) == 1 \
            and all(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                    and k.value.value is True for k in value.keywords):
        value = value.args[0]
    value = S.made_trainable(value) or value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr == "clone" and not value.args and not value.keywords:
        value = value.func.value
    into = S.segment(text, st.targets[0]) + ("" if no_grad else ".data")
    return fixes.edit_at(site.path, (st.lineno, st.col_offset),
                     (st.end_lineno or st.lineno, st.end_col_offset or 0),
                     f"{into}.copy_({S.segment(text, value)})")


def state_copy(fixes: FixWriter, site: Site) -> Edit | None:
    """The assignment of a new submodule at ``site`` (``X = nn.Linear(...)``) made a copy of its
    state into the submodule ``X`` holds, whose tensors the optimizer steps:
    ``X.load_state_dict(nn.Linear(...).state_dict())``. ``None`` for another statement."""
    found = S.statement_at(site.path, site.line)
    if found is None:
        return None
    st, text = found
    if not isinstance(st, ast.Assign) or len(st.targets) != 1 or \
            not isinstance(st.targets[0], ast.Attribute | ast.Subscript) or \
            not isinstance(st.value, ast.Call):
        return None
    return fixes.edit_at(site.path, (st.lineno, st.col_offset),
                     (st.end_lineno or st.lineno, st.end_col_offset or 0),
                     f"{S.segment(text, st.targets[0])}.load_state_dict("
                     f"{S.segment(text, st.value)}.state_dict())")


def _names_parameter(func: ast.expr) -> bool:
    """Whether a call's function is ``Parameter`` (``nn.Parameter``, ``torch.nn.Parameter``)."""
    return (isinstance(func, ast.Name) and func.id == "Parameter") or (
        isinstance(func, ast.Attribute) and func.attr == "Parameter")
