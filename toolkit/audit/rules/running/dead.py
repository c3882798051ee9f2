"""Stepped tensors no loss reached since their last step (``dead``): the cut that kept them
from it (a ``.detach()``, a call under ``no_grad``), told apart from a target's cut (its
network held by the optimizer for nothing: information) and from a copy the script moves
itself (judged at the next step)."""

from __future__ import annotations

import ast
import linecache
import os

import torch
import torch.overrides

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.kinds import Kind
from toolkit.audit.record import syntax as S
from toolkit.audit.record.backward import (
    Graph,
    read_graph,
)
from toolkit.audit.record.frames import Site, user_frame
from toolkit.audit.record.handed import handed_from, parameter_holding
from toolkit.audit.record.tensors import storage_of
from toolkit.audit.result import plural
from toolkit.audit.rules.running.replaced import old_tensors
from toolkit.audit.rules.running.state import WatchState
from toolkit.audit.rules.running.weighed import weighed

#: what to do with tensors an optimizer holds for nothing (a target, an EMA copy)
_HELD_FOR_NOTHING = "leave them out of the optimizer, or requires_grad_(False) where they are made"

__all__ = ["add_dead", "cut_of", "dead", "is_idle", "is_misplaced", "parameter_modules",
           "reached_keys", "read_by_training", "settle", "target_cut", "target_only"]


def _trained_elsewhere(w: WatchState, p: torch.Tensor, index: int) -> bool:
    """Whether another optimizer stepped ``p`` with its gradient in this iteration, while the
    ``index``-th skips it (``.grad`` is ``None``) and no cut keeps it from this loss, or the
    ``index``-th holds it only through a tie (:func:`_tied`)."""
    iteration, by = w.trained_by.get(id(p), (-1, index))
    return iteration == w.iteration and by != index and p.grad is None and (
        cut_of(w, p) is None or _tied(w, p))


def _tied(w: WatchState, p: torch.Tensor) -> bool:
    """Whether ``p`` is registered on two modules of the script's networks (a weight tied by
    assignment, ``conv.weight = source_conv.weight``: SAC-AE's and DrQ's actor takes the
    critic's convolutions so, and an optimizer built over the actor's parameters holds them
    for the critic, whose loss trains them, while the actor's loss reads them cut)."""
    owners = {id(sub) for network, _ in w.networks() for sub in network.modules()
              if any(q is p for q in sub._parameters.values())}
    return len(owners) > 1


def dead(w: WatchState, index: int, event: int, site: Site | None, stepped) -> None:
    names = w.names()
    # a tensor a backward's graph reached, with a gradient of exactly zero (a recurrent
    # weight read against a zero first state, a hinge loss's last bias while every logit is
    # inside the margin), is not dead: only one no graph reached since its last step, or
    # since a clear removed the gradient a graph gave it
    dead = [(k, p) for k, p in stepped if not w.ledger.live.get(id(p))
            and (w.reached_at.get(id(p), -1) <= w.last_step_of.get(id(p), -1)
                 or (w.ledger.cleared.get(id(p))
                     and w.reached_at.get(id(p), -1) <= w.cleared_at.get(id(p), -1)))]
    # one another optimizer stepped with its gradient in this iteration, its .grad None here
    # (the optimizer skips it) and no cut between it and this loss: trained, and held here
    # too (InfoGAN's information optimizer over both networks, the discriminator's
    # adversarial head trained by its own); one a cut keeps from this loss stays dead
    dead = [(k, p) for k, p in dead if not _trained_elsewhere(w, p, index)]
    # one whose gradient a clear under a condition removed: a scheduled freeze, judged over
    # the whole run (``never_trained``)
    dead = [(k, p) for k, p in dead if id(p) not in w.scheduled]
    # one a replacing assignment took off its module: that rule's finding says so
    gone = old_tensors(w)
    dead = [(k, p) for k, p in dead if id(p) not in gone]
    # one a term of the loss was meant to train, computed as a constant (its network's own
    # loss under no_grad, the step audit's constant term): that finding names it
    if dead and (meant := w.in_constant_terms()):
        dead = [(k, p) for k, p in dead if names.get(id(p), k) not in meant]
    if not dead:
        return
    misplaced = is_misplaced(w, index, stepped, dead)
    read = read_by_training(w)
    owners = parameter_modules(w)
    # a target meets a prediction some network makes: where the losses train no network's
    # tensors (a GFlowNet's log Z alone, its policy run under no_grad), what the network cut
    # off computes is no target but the part meant to train
    trained = any(live and k in owners for k, live in w.ledger.live.items())
    targets = [(k, p) for k, p in dead if _cut_mid_forward(w, p) is None
               and not weighed(w, p) and target_only(w, p, read)] if trained else []
    if targets:
        dead = [(k, p) for k, p in dead if not any(p is q for _, q in targets)]
        w.add(ScriptFinding(
            "hand_updated", w.iteration,
            f"{plural(len(targets), 'tensor')} an optimizer steps get no gradient: they "
            f"compute a target cut off from the loss (under no_grad, or .detach()-ed), "
            f"whose output meets the prediction only in the loss (a teacher, a key "
            f"encoder): the optimizer does nothing with them",
            tuple(k for k, _ in targets), tuple(names.get(id(p), k) for k, p in targets),
            (site.shown(),) if site is not None else (),
            advice=_HELD_FOR_NOTHING, step=w.step_events - 1))
    if not dead:
        return
    groups: dict[tuple, list[tuple[str, torch.Tensor]]] = {}
    info: dict[tuple, tuple] = {}
    for key, p in dead:
        cleared = [s for s in w.ledger.cleared.get(id(p), []) if s.step is None
                   and s.index > w.last_step_of.get(id(p), -1)]
        if cleared:
            src = cleared[-1]
            clear = next((c for c in reversed(w.clears) if id(p) in c[1]), None)
            g = ("cleared", src.site, clear[0] if clear else None)
            info[g] = (src, clear)
        else:
            cut = cut_of(w, p, owners)
            g = ("dead", cut, None)
        groups.setdefault(g, []).append((key, p))
    # tensors with no cut of their own, in a step where one edited cut starves others:
    # that cut is the likeliest (its input read under no_grad, not by a module), and the
    # edit's rerun proves it, or rejects it for a tensor that still gets nothing
    cut_groups = [g for g in groups if g[0] == "dead" and g[1] is not None and g[1][2]]
    if len(cut_groups) == 1:
        for g in [g for g in groups if g[0] == "dead" and g[1] is None]:
            groups[cut_groups[0]] = groups.pop(g) + groups[cut_groups[0]]
    for g, hit in groups.items():
        keys = tuple(k for k, _ in hit)
        shown = tuple(names.get(id(p), k) for k, p in hit)
        if g[0] == "cleared":
            if misplaced:
                continue   # cleared for the loss the optimizer was meant for: built over these
            src, clear = info[g]
            w._cleared_sources.add(src)
            clear_site = clear[0] if clear else None
            at = tuple(s.shown() for s in (src.site, clear_site, site) if s is not None)
            edits: tuple = ()
            if clear_site is not None and src.site is not None and \
                    clear_site.path == src.site.path:
                edits = tuple(w.fixes.move_before(clear_site.path, clear_site.line,
                                            src.site.line))
            w.add(ScriptFinding(
                "cleared", w.iteration,
                f"{w.optimizer_text(index, site) or 'the optimizer'} steps {len(hit)} "
                f"tensors with no gradient: the gradient of {src.label} (backward at "
                f"{src.site}) was cleared"
                + (f" by {clear_site.text()} at {clear_site}" if clear_site else "")
                + " before the step", keys, shown, at, edits,
                advice="clear gradients before backward(), not between backward() and "
                       "step()", step=w.step_events - 1, concerned=keys))
            continue
        _kind, cut = g[0], g[1]
        if cut is not None:
            cut_site, cut_what, edit, mid_forward = cut
            if _switched_off(w, index, site, cut, hit, keys, shown):
                continue
            # with the values the cut makes, as the script names them (not a name the
            # script's frames hold with a graph: a loss made with the cut value)
            made = sorted(n for line in (S.block_body(cut_site.path, cut_site.line)
                                         or [cut_site.line])
                          for n in S.assigned_names(cut_site.path, line)
                          if not (isinstance(v := w.scope.get(n), torch.Tensor)
                                  and (v.grad_fn is not None or v.requires_grad))) \
                if cut_site.path else []
            add_dead(w, hit, ScriptFinding(
                "dead", w.iteration,
                f"no loss reaches {len(hit)} tensors "
                f"{w.optimizer_text(index, site) or 'the optimizer'} steps: {cut_what} "
                f"at {cut_site} cuts them off", keys, shown,
                (cut_site.shown(),) + ((site.shown(),) if site else ()), edit,
                advice=f"remove the cut at {cut_site} if these tensors are meant to train "
                       f"from this loss", step=w.step_events - 1,
                concerned=tuple(reached_keys(w, cut_site, stepped)) or keys,
                extra={**({"misplaced": index} if misplaced else {}),
                       **({"mid_forward": True} if mid_forward else {})}, values=tuple(made)))
        else:
            add_dead(w, hit, ScriptFinding(
                "dead", w.iteration,
                f"no loss reaches {len(hit)} tensors "
                f"{w.optimizer_text(index, site) or 'the optimizer'} steps "
                f"(none of this iteration's backward() calls gave them a gradient)",
                keys, shown, (site.shown(),) if site else (), (),
                advice="use them in a loss, or leave them out of the optimizer if they "
                       "are meant to stay as they are", step=w.step_events - 1,
                concerned=keys, extra={
                    # the events since these tensors' last step (watched or not), up to
                    # this one: where a forward of their modules would have run for this step
                    "window": (min(w.stepped_at.get(id(p), -1) for _, p in hit), event),
                    # whether the losses trained others of the tensors this optimizer steps
                    "others_trained": any(w.ledger.live.get(id(p)) for _, p in stepped),
                    **({"misplaced": index} if misplaced else {})}))


def _switched_off(w: WatchState, index: int, site: Site | None, cut: tuple,
                  hit: list[tuple[str, torch.Tensor]], keys: tuple, shown: tuple) -> bool:
    """Whether the cut that keeps ``hit`` from the losses is the ``no_grad`` branch of a
    switch of the script's own whose other branch makes the same call with a graph
    (:func:`~toolkit.audit.record.syntax.switched_branch`), and a loss trained each of them
    in an earlier iteration: the script shows both, and which one a phase takes is a setting
    of the method (fairseq's fine-tuning sets ``feature_grad_mult = 0``, and its feature
    encoder runs under ``no_grad`` while the fine-tuning optimizer holds it). Then the
    tensors are reported as held for nothing (``switched_off``, information)."""
    cut_site, cut_what = cut[0], cut[1]
    other = S.switched_branch(cut_site.path, cut_site.line) if cut_site.path else None
    if other is None or not all(w.reached_in.get(id(p), (w.iteration,))[0] < w.iteration
                                for _, p in hit):
        return False
    w.cut_by_switch.update(id(p) for _, p in hit)
    w.add(ScriptFinding(
        "switched_off", w.iteration,
        f"{len(hit)} tensors {w.optimizer_text(index, site) or 'an optimizer'} steps get no "
        f"gradient: {cut_what} at {cut_site} keeps them from every loss, and the other branch "
        f"of the script's switch, at line {other}, makes the same call with a graph, which "
        f"trained them earlier in the run (a part this phase freezes): the optimizer holds "
        f"them for nothing here", keys, shown,
        (cut_site.shown(),) + ((site.shown(),) if site else ()),
        advice="leave them out of this phase's optimizer if the freeze is meant; take the "
               "branch that trains them if this phase is meant to train them",
        step=w.step_events - 1))
    return True


def is_misplaced(w: WatchState, index: int, stepped, dead) -> bool:
    """Optimizer membership by role: the losses of this step (the backward() calls since
    the step before it) reach none of the tensors the optimizer holds, and reach tensors
    no optimizer holds (``optimizer_D`` built over the encoder, a line copied from the one
    above, while its loss trains the discriminator). Its argument is the wrong network:
    kept for the rule of tensors no optimizer steps
    (:func:`.unstepped.end_of_iteration`), whose edit replaces it."""
    # the losses since the last step reach none of its tensors (those another optimizer
    # trained before, their gradient cleared since, are not dead, and not reached either);
    # its step's losses are those after it cleared its tensors (CoopNets' latent codes,
    # inferred by backward() calls through the generator it holds, before it clears them and
    # the descriptor's loss is written)
    after = max([w.previous_step_event, *(w.cleared_at.get(id(p), -1) for _, p in stepped)])
    since = set().union(*(r for e, r in w.reached_by if e > after))
    if not dead or any(id(p) in since for _, p in stepped):
        return False
    earlier = w.of_earlier_loops()
    reached = since - {k for k, i in w.stepped_map().items() if i not in earlier}
    if not reached:
        # or tensors that only optimizers not stepped yet hold, built up front for a later
        # phase (TimeGAN's joint solver over the supervisor, SeqGAN's adversarial optimizer
        # over the generator its pre-training trains): no step has moved them, and this
        # phase's step, moving none of its own, was meant for them
        reached = _held_for_later(w, since)
        if not reached:
            return False
        w.held_for_later = (w.iteration, reached)
    w.misplaced[index] = (reached, tuple(k for k, _ in dead))
    _handed_optimizer(w, index)
    return True


def _held_for_later(w: WatchState, reached: set[int]) -> set[int]:
    """The tensors of ``reached`` that optimizers hold, none of which has stepped yet, each
    built before this loop began (up front, for a later phase; not a network's replacement,
    built with its optimizer while the loop runs, whose rule is the never-stepped one)."""
    held: set[int] = set()
    moved: set[int] = set()
    for i, opt in enumerate(w.optimizers):
        ids = {id(p) for g in opt.param_groups for p in g["params"]}
        if i in w.optimizer_stepped or w.built_event.get(id(opt), 0) > w.loop_began:
            moved |= ids
        else:
            held |= ids
    return (reached & held) - moved


def _handed_optimizer(w: WatchState, index: int) -> None:
    """Where the user's code handed the helper that steps the ``index``-th optimizer that
    optimizer (a parameter of its own, followed out to the caller that chose it), with the
    optimizers that caller could name instead: kept for the edit that hands it another."""
    frame = user_frame()
    opt = w.optimizers[index]
    name = parameter_holding(frame, opt) if frame is not None else None
    handed = handed_from(frame, name) if frame is not None and name else None
    if handed is None or not isinstance(handed.node, ast.Name):
        return
    scope = {**handed.frame.f_globals, **handed.frame.f_locals}
    names: dict[int, list[str]] = {}
    for k, v in scope.items():
        if isinstance(v, torch.optim.Optimizer):
            names.setdefault(id(v), []).append(k)
    if handed.spelled in names.get(id(opt), ()):
        w.handed_optimizers[index] = (handed.path, handed.node, names)


def read_by_training(w: WatchState) -> set[str]:
    """The names the calls of networks that train read as arguments, with gradients on,
    at the user's lines."""
    read: set[str] = set()
    for key, by_name in w.called_as.items():
        module = w.roots[key][0]
        if any(q.requires_grad for q in module.parameters()):
            read |= {n for uses in by_name.values() for g, site, _ in uses if g
                     for n in S.argument_names(site.path, site.span)}
    return read


def target_only(w: WatchState, p: torch.Tensor, read: set[str]) -> bool:
    """Whether every call under no_grad that reads ``p`` made a value that no network
    that trains reads (a target: it meets the prediction only in the loss), and there was
    one. What a ``with torch.no_grad():`` block assigns is matched to ``read`` (see
    :func:`read_by_training`); a value a network reads as it is (a view of the output)
    is matched by its storage."""
    calls = [(m, lines) for m, _, lines, _, _ in w.no_grad_calls
             if any(q is p for q in m.parameters())]
    if not calls:
        return target_cut(w, p, read)
    if any(id(m) in w.feeds_trained for m, _ in calls):
        return False
    for _, lines in calls:
        made = next((names for path, line in lines
                     if (names := S.no_grad_block_names(path, line)) is not None), None)
        if made and made & read:
            return False
    return True


def target_cut(w: WatchState, p: torch.Tensor, read: set[str]) -> bool:
    """Whether every ``.detach()`` whose input reaches ``p`` made a value that no network
    that trains reads, and there was one: the cut of a target, as a call under no_grad
    (see :func:`target_only`). The value is matched by its storage (read as it is, a
    backbone's features under a head) and by the names the detach's statement assigns."""
    cuts = [(node, site, storage_of(out), read_graph([node]).leaves) for node, site, out, _
            in w.detaches]
    cuts = [(node, site, storage, leaves) for node, site, storage, leaves in cuts
            if id(p) in leaves]
    if not cuts:
        return False
    rec = getattr(getattr(w, "staged", None), "rec", None)
    for node, site, storage, leaves in cuts:
        # weights a network generated, cut, and read by a layer function as its weight (a
        # hypernetwork's blocks, dynamic filters) are the prediction's own
        if rec is not None and id(node) in rec.cut_weights:
            return False
        # a cut of a network some of whose tensors a loss trains (a value head on a shared
        # trunk) is on the prediction's side, not a separate target's
        if any(w.ledger.live.get(k) for k in leaves):
            return False
        if storage in w.trained_reads:
            return False
        if S.assigned_names(site.path, site.line) & read or _in_trained_call(w, site):
            return False
    return True


def _in_trained_call(w: WatchState, site: Site) -> bool:
    """Whether the cut at ``site`` is written inside the arguments of a call, with gradients
    on, of a network that trains (``model(delta + embeds.detach(), mask)``: FreeLB's
    perturbed input): the cut value is that network's input, not a target beside it."""
    if site.span is None:
        return False
    line, end, col, end_col = site.span
    for key, by_name in w.called_as.items():
        if not any(q.requires_grad for q in w.roots[key][0].parameters()):
            continue
        for uses in by_name.values():
            for grad, call, _ in uses:
                span = call.span
                if grad and span is not None and call.path == site.path and \
                        (span[0], span[2]) < (line, col) and (end, end_col) <= (span[1], span[3]):
                    return True
    return False


def add_dead(w: WatchState, hit: list[tuple[str, torch.Tensor]], finding: ScriptFinding) -> None:
    """A dead finding, judged at the next step (or the end): see :func:`settle`."""
    if finding.key in w.findings:
        return
    w.pending_dead.append((finding, [(p, p.detach().clone()) for _, p in hit]))


def settle(w: WatchState, final: bool = False) -> None:
    """The dead findings waiting since an earlier step: a tensor whose values changed
    though no gradient reached it was moved by the script itself (an EMA or momentum
    copy, a target network synced by hand): its optimizer holds it for nothing, which is
    information; the others are failures. At the end, a tensor seen moved before counts
    as moved. Tensors with no cut, not moved, wait for the end (:func:`_idle`): the modules
    that hold them may run in another phase."""
    waiting = []
    for finding, values in w.pending_dead:
        moved = [id(p) for p, old in values
                 if p.shape != old.shape or not torch.equal(p.detach(), old)]
        w.hand_updated.update(moved)
        if not moved and not final and finding.iteration == w.iteration:
            waiting.append((finding, values))   # its own iteration's step: wait
            continue
        if moved or all(id(p) in w.hand_updated for p, _ in values):
            finding = ScriptFinding(
                "hand_updated", finding.iteration,
                f"{len(values)} tensors an optimizer steps get no gradient and the script "
                f"moves them itself (an EMA or momentum copy, or values it rewrites in place, "
                f"as a renormalisation does): the optimizer does nothing with them",
                finding.tensors, finding.names, finding.at, advice=_HELD_FOR_NOTHING,
                step=finding.step)
        elif finding.extra.get("window"):
            w.pending_idle.append((finding, [id(p) for p, _ in values]))
            continue
        elif not finding.extra.get("mid_forward") and all(
                w.reached_in.get(id(p), (finding.iteration,))[0] < finding.iteration
                for p, _ in values):
            w.pending_reached.append((finding, [id(p) for p, _ in values]))
            continue
        w.add(finding)
    w.pending_dead = waiting
    if final:
        _now_and_then(w)
        _idle(w)


def _now_and_then(w: WatchState) -> None:
    """Each dead finding with a cut whose tensors a loss reached in an earlier iteration, at
    the end: when a loss reached each of them again after the first iteration that found
    them so, they are trained at some iterations and not at others, as the method means
    (option-critic's critic, whose loss joins the actor's every few steps, while the actor's
    reads it cut): nothing to report. Otherwise a loss stopped reaching them (a cut that
    begins late): a failure."""
    first: dict[tuple[int, ...], int] = {}
    for finding, tensors in w.pending_reached:
        key = tuple(sorted(tensors))
        first[key] = min(first.get(key, finding.iteration), finding.iteration)
    for finding, tensors in w.pending_reached:
        since = first[tuple(sorted(tensors))]
        left = {t for t in tensors if w.reached_in.get(t, (0, -1))[1] <= since}
        # those a later cut keeps from the losses, each found at its own line (a freeze of a
        # whole trunk for a phase's first updates, ended, over a part the phase keeps cut):
        # that cut is the finding
        later = {t for other, ts in w.pending_reached
                 if other.iteration > finding.iteration and other.at != finding.at
                 for t in ts} | w.cut_by_switch
        if left and not left <= later:
            w.add(finding)
    w.pending_reached = []


def _idle(w: WatchState) -> None:
    """Each dead finding with no cut, at the end: when no forward of the modules that hold its
    tensors ran since their last step (before the step that found them) in the step's own
    iteration (a run under no_grad in an earlier iteration of another loop, ENAS's controller
    scoring the shared network, is another time) and each of them runs at another time (in an
    iteration recorded, or its tensors stepped with a gradient at a step between those), they
    are a part another phase trains (pre-training's decoder while fine-tuning, the head while
    pre-training), held by this phase's optimizer for nothing: ``idle``, information. When each
    of those modules ran in that window with a graph (gradients on, its output requiring grad)
    and no loss read the output, while the same step trained others of the optimizer's
    tensors, they are a part
    whose output the method leaves out (a classifier head under features distilled or
    compared, STPM's student; a decoder head while the encoder trains), or a term with no
    effect on what the loss reads (an energy's last bias, where the loss reads the energy's
    gradient with respect to its input): ``unused``,
    information, as every torch optimizer skips a tensor whose ``.grad`` is ``None``.
    Otherwise it stays dead (a module the script never runs at all is a failure; so is one
    that ran with gradients off, or whose optimizer's tensors all got none)."""
    if not w.pending_idle:
        return
    owners = parameter_modules(w)
    for finding, tensors in w.pending_idle:
        lo, hi = finding.extra["window"]
        # a run of an earlier iteration in the window (another loop's evaluation under
        # no_grad: ENAS's controller scoring the shared network) is another time; one of the
        # step's own iteration is not
        since = max(lo, w.iteration_began.get(finding.iteration, lo))
        held_by = {owners.get(t) for t in tensors}
        ran = {m: w.ran.get(m, set()) for m in held_by if m is not None}
        # a module runs at another time when a recorded iteration saw it run, or when an
        # optimizer stepped its tensors with a gradient at a step between the recorded ones
        # (a block stochastic depth dropped in every iteration the audit recorded, which no
        # recorded call names)
        between = {m: all(t in w.stepped_with_grad for t in tensors if owners.get(t) == m)
                   for m in held_by}
        if all((ran.get(m) or between[m]) and not any(since <= e < hi for e in ran.get(m, ()))
               for m in held_by):
            finding = _for_nothing(
                w, finding, tensors, "idle",
                f"no forward of {_their(held_by)} ran since their last step, and "
                f"{'it runs' if len(held_by) == 1 else 'they run'} at another time (a part "
                f"another phase trains): the optimizer holds them for nothing here",
                "build this phase's optimizer over the parts it trains, if the others are "
                "to keep their optimizer state for their own phase")
        elif None not in held_by and finding.extra.get("others_trained") and all(
                any(lo <= e < hi for e in w.ran_with_graph.get(m, ())) for m in held_by):
            finding = _for_nothing(
                w, finding, tensors, "unused",
                f"{_their(held_by)} ran with a graph, and no loss's gradient reached them (an "
                f"output the method leaves out, or a term with no effect on what the loss "
                f"reads), while the same step trained the optimizer's other tensors: the "
                f"optimizer skips them",
                "leave them out of the optimizer, or out of the forward, if their output is "
                "not meant for a loss; add their loss, if it is")
        elif any(f.kind == Kind.DEAD and "window" not in f.extra
                 and set(finding.tensors) <= set(f.tensors) for f in w.findings.values()):
            # the same tensors dead at a step whose record names the cut that starves them
            # (a step the recording joined late, its no_grad call unseen): that finding is it
            continue
        w.add(finding)
    w.pending_idle = []


def _for_nothing(w: WatchState, finding: ScriptFinding, tensors: list[int], kind: str,
                 why: str, advice: str) -> ScriptFinding:
    """A dead finding told apart as information: tensors an optimizer holds for nothing."""
    return ScriptFinding(
        kind, finding.iteration,
        f"{len(tensors)} tensors an optimizer steps get no gradient: {why}",
        finding.tensors, _names(w, finding, tensors), finding.at, advice=advice,
        step=finding.step)


def _their(modules: set) -> str:
    """``their module``, ``their 2 modules``."""
    return "their module" if len(modules) == 1 else f"their {len(modules)} modules"


def _names(w: WatchState, finding: ScriptFinding, tensors: list[int]) -> tuple[str, ...]:
    """The tensors' names as the script holds them at the end (a module first called in a
    later phase is named by then)."""
    names = w.names()
    return tuple(names.get(t, old) for t, old in zip(tensors, finding.names, strict=True))


def parameter_modules(w: WatchState) -> dict[int, int]:
    """Each parameter of the modules the script called, by ``id``, with the ``id`` of the
    module that holds it itself (not one of its parents)."""
    out: dict[int, int] = {}
    for root, _ in list(w.roots.values()):
        for module in root.modules():
            for p in module._parameters.values():
                if p is not None:
                    out.setdefault(id(p), id(module))
    return out


def cut_of(w: WatchState, p: torch.Tensor, owners: dict[int, int] | None = None):
    """The user's ``.detach()`` (or ``no_grad`` module call) that keeps ``p`` from the
    losses: a detach whose input's graph reaches ``p``. ``owners``: :func:`parameter_modules`,
    where the caller has it."""
    # a cut whose values an operation with a graph read (the predictor's input, cut): its
    # removal gives the loss a path; before the last cut (a key chosen by ``argmax``)
    rec = w.staged.rec
    read = {(os.path.abspath(line.path), line.number) for _, cuts, _, _, _ in
            (rec.cut_read if rec is not None else ()) for line, how, _ in cuts
            if line is not None and line.path and how == "detach"}
    # a detach made before p's last step kept nothing from the losses since (a discriminator's
    # cut of the encoder's output in an earlier phase)
    last = w.last_step_of.get(id(p), -1)
    detaches = sorted((d for d in reversed(w.detaches) if d[3] >= last), key=lambda d: (
        os.path.abspath(d[1].path), d[1].line) not in read)
    for node, site, _, made in detaches:
        graph: Graph = read_graph([node])
        if id(p) in graph.leaves:
            # made before the forward of the last backward (the loss of this step: a
            # discriminator's step cut the fakes before it), a cut in that forward is this
            # loss's (DiffAugment's generator augmented under no_grad)
            own = _cut_mid_forward(w, p) if made < w.last_backward - 1 else None
            if own is not None:
                return own
            edit = w.fixes.remove_detach(site.path, site.span)
            # what every pass of that line cut (a detach in a loop or a comprehension)
            nodes = [n for n, s, _, _ in w.detaches if s == site]
            w.reach_cache = (site, set(read_graph(nodes).leaves))
            return site, "`.detach()`", (edit,) if edit is not None else (), False
    mid_forward = _cut_mid_forward(w, p)
    if mid_forward is not None:
        return mid_forward
    # a module that also ran with a graph since p's last step was not kept from the loss by
    # a call under no_grad: no loss read that output (judged at the end, :func:`_idle`)
    if _ran_with_graph(w, p, parameter_modules(w) if owners is None else owners):
        return None
    # the last call under no_grad that reads p, itself or through its inputs' graph: the
    # one whose output the loss reads
    for module, site, lines, inputs, _ in reversed(w.no_grad_calls):
        if any(q is p for q in module.parameters()) or (
                inputs and id(p) in read_graph(inputs).leaves):
            for path, line in lines:
                moved = w.fixes.out_of_no_grad(path, line)
                if moved is not None:
                    at, edits = moved
                    cut = S.cutting_call(path, line) or "torch.no_grad()"
                    return Site(path, at, None), _moved(path, at, cut), tuple(edits), False
            return site, f"a call of {type(module).__name__} under no_grad", (), False
    return None


def _cut_mid_forward(w: WatchState, p: torch.Tensor):
    """The user's own code run under no_grad in the middle of a forward: a block (or a
    function decorated ``@torch.no_grad()``) that computed values from ``p`` with a graph and
    cut them, while a layer that trains read the result (Manifold Mixup's mixing of hidden
    states in a helper decorated so): the forward went on from values whose path back to
    ``p`` is gone, at every iteration that runs it. As :func:`cut_of`, with the edit that
    takes the statement out of its block, or the decorator off; ``None`` where there is no
    such cut."""
    rec = w.staged.rec
    if rec is None or not rec.cut_fed:
        return None
    for cuts, _ in reversed(rec.cut_fed):
        for line, how, origin in cuts:
            if how != "no_grad" or not any(origin is o for o in rec.block_origins) or \
                    not any(q is p for q in origin):
                continue
            caller = rec.cut_callers.get((line, id(origin[0])))
            if caller is None or not caller.path:
                continue
            if line is not None:
                moved = w.fixes.out_of_no_grad(caller.path, caller.number)
                cut = S.cutting_call(caller.path, caller.number) or "torch.no_grad()"
                body = S.block_body(line.path, line.number) if moved is None else []
                if len(body) == 1:   # a block of the step's own code, around a helper's call
                    moved = w.fixes.out_of_no_grad(line.path, body[0])
                    cut = S.cutting_call(line.path, body[0]) or "torch.no_grad()"
                if moved is not None:
                    what = _moved(line.path if body else caller.path, moved[0], cut)
            else:
                moved = w.fixes.off_decorator(caller.path, caller.number)
                if moved is not None:
                    decorator = linecache.getline(caller.path, moved[0]).strip()
                    what = f"`{decorator}` on `{caller.function}`"
            if moved is None:
                continue
            at, edits = moved
            return Site(caller.path, at, None), what, tuple(edits), True
    return None


def _moved(path: str, at: int, cut: str) -> str:
    """What an edit takes out of ``with cut:``: the statement at ``at``, or the block whose
    ``with`` is there (:func:`~toolkit.audit.fixes.switch_edits.out_of_no_grad`)."""
    if S.block_body(path, at):
        return f"the block `{linecache.getline(path, at).strip()}`"
    # a compound statement (the loop a helper runs its networks in) by its header's line
    text = S.statement_text(path, at) or linecache.getline(path, at).strip()
    return f"`{text}` under `with {cut}`"


def is_idle(w: WatchState, p: torch.Tensor, owners: dict[int, int]) -> bool:
    """Whether the module that holds ``p`` (``owners``: :func:`parameter_modules`) ran before
    and not with a graph since ``p``'s last step (a block stochastic depth dropped, a part of
    another phase; its call in an evaluation under no_grad makes no graph): no gradient is its
    due."""
    return bool(w.ran.get(owners.get(id(p), -1))) and not _ran_with_graph(w, p, owners)


def _ran_with_graph(w: WatchState, p: torch.Tensor, owners: dict[int, int]) -> bool:
    """Whether the module that holds ``p`` (``owners``: :func:`parameter_modules`) ran with a
    graph since ``p``'s last step."""
    owner = owners.get(id(p))
    last = w.last_step_of.get(id(p), -1)
    return owner is not None and any(e >= last for e in w.ran_with_graph.get(owner, ()))


def reached_keys(w: WatchState, cut_site: Site, stepped) -> list[str]:
    cache = w.reach_cache
    if cache is None or cache[0] != cut_site:
        return []
    return [k for k, p in stepped if id(p) in cache[1]]
