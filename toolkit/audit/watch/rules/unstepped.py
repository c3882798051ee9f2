"""At the end of an audited iteration: gradient in tensors no optimizer steps, between a loss
and stepped tensors or part of a model whose other tensors are stepped (``unstepped``, with
the parameter group that adds them), or elsewhere (``wasted``, a note)."""

from __future__ import annotations

from torch import nn

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes import script_edits as E
from toolkit.audit.record import syntax as S
from toolkit.audit.watch.rules import copies
from toolkit.audit.watch.state import WatchState

__all__ = ["end_of_iteration"]


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
    stepped = w.stepped_map()
    names = w.names()
    by_root: dict[int, list[int]] = {}
    for key, live in w.ledger.live.items():
        if key in stepped or not live:
            continue
        owner = w.owner(key)
        if owner is None:
            continue
        by_root.setdefault(id(owner), []).append(key)
    for root, keys in by_root.items():
        module, name = w.roots[root]
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
        if not trained and not inside and wrong is None:
            w.add(ScriptFinding(
                "wasted", w.iteration,
                f"{len(keys)} tensors of {name} get gradient that no optimizer uses (below "
                f"every trained tensor, so nothing else needs it): work done in vain",
                shown, shown, at, advice=f"{name}.requires_grad_(False) if they are meant "
                                         f"to stay as they are; else add them to an "
                                         f"optimizer"))
            continue
        opts = sorted({i for k in inside for i in w.between[k]}) or sorted(
            {stepped[id(p)] for p in module.parameters() if id(p) in stepped})
        if wrong is not None:
            opts = [wrong]
        opt = w.optimizers[opts[0]] if opts else None
        built = w.built_at.get(id(opt)) if opt is not None else None
        edits: tuple = ()
        opt_name = S.assigned_name(built.path, built.line) if built is not None else None
        extra_concerned: tuple[str, ...] = ()
        what = ("no optimizer steps them, though the loss's gradient reaches the tensors "
                "an optimizer steps through them" if inside else
                f"no optimizer steps them, though an optimizer steps the rest of {name}")
        if wrong is not None and built is not None:
            e = E.replace_parameters(built.path, built.line,
                                     _parameters_text(module, name, set(keys)))
            if e is not None:
                edits = (e,)
                extra_concerned = w.misplaced[wrong][1]
                w.pending_dead = [(f, v) for f, v in w.pending_dead
                                     if f.extra.get("misplaced") != wrong]
                opt_text = f"`{opt_name}`" if opt_name else "the optimizer"
                what = (f"the loss of {opt_text}'s step trains them and none of the tensors "
                        f"it holds: it is built over the wrong parameters")
        elif built is not None and opt_name:
            params = _parameters_text(module, name, set(keys))
            e = E.insert_after(built.path, built.line,
                               f'{opt_name}.add_param_group({{"params": {params}}})')
            edits = (e,) if e is not None else ()
        w.add(ScriptFinding(
            "unstepped", w.iteration,
            f"{len(keys)} tensors of {name} get gradient and {what}",
            shown, shown, ((built.shown(),) if built is not None else ()) + at, edits,
            advice=f"add them to {('`' + opt_name + '`') if opt_name else 'the optimizer'}"
                   f" (optimizer.add_param_group({{'params': [...]}}), or in its "
                   f"constructor)", step=w.step_events - 1,
            concerned=tuple(shown) + extra_concerned))


def _parameters_text(module: nn.Module, name: str, keys: set[int]) -> str:
    """The parameters of ``module`` (called ``name`` in the user's code) whose ids are
    ``keys``, as the user would write them: ``name.parameters()`` when they are all of it, the
    largest submodules they fill whole (``[*model.fc22.parameters()]``), else each one
    (``model.fc22.weight``); a numbered child is indexed (``net[0]``)."""
    def attr(path: str) -> str:
        return "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in path.split(".") if p)

    every = {id(p) for p in module.parameters()}
    if every and every <= keys:
        return f"{name}.parameters()"
    parts, covered = [], set()
    for sub_name, sub in module.named_modules():
        ids = {id(p) for p in sub.parameters()}
        if sub_name and ids and ids <= keys and not ids <= covered:
            parts.append(f"*{name}{attr(sub_name)}.parameters()")
            covered |= ids
    for p_name, p in module.named_parameters():
        if id(p) in keys and id(p) not in covered:
            parts.append(f"{name}{attr(p_name)}")
    if len(parts) == 1 and parts[0].startswith("*"):
        return parts[0][1:]
    return "[" + ", ".join(parts) + "]"
