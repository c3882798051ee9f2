"""The result of :func:`toolkit.audit.audit_step`: findings by kind, and their report.

Failures (``StepAudit.ok`` is ``False`` when any is present):

- ``leaks`` (:class:`~toolkit.audit.Leak`): a loss's gradient reaches a tensor its
  optimizer does not step, and a cut can remove it without cutting a stepped tensor off the
  loss; or the optimizer steps a tensor the step also writes in place from other trained
  tensors (updated twice: an EMA written into a stepped tensor);
- ``targets`` (:class:`~toolkit.audit.TrainedTarget`): a regression, TD,
  soft-target or score-function loss whose target side reaches the parameters being trained;
- ``dead`` (:class:`~toolkit.audit.DeadParameter`): a stepped tensor that requires
  grad and that none of its losses gives a gradient, or only one of exact zeros on both
  calls by the step's structure (a real ``autograd.grad`` per loss decides);
- ``carried`` (:class:`~toolkit.audit.CarriedGraph`): the step's graph reaches graph
  made before the step (one finding per carried tensor);
- ``held`` (:class:`~toolkit.audit.HeldGraph`): a module's buffer or tensor attribute
  holds a ``grad_fn`` after the step, or a list, dict, global or closure variable keeps the
  graph of both calls;
- ``constant_terms`` (:class:`~toolkit.audit.ConstantTerm`): a term added to a loss, made from
  a gradient ``torch.autograd.grad`` took without ``create_graph=True``: a constant that trains
  nothing (a gradient penalty written without a graph);
- ``cut_keys`` (:class:`~toolkit.audit.CutKeys`): the keys a loss over several keys reads
  (a contrastive or prototype loss) cut from a network the loss's optimizer steps;
- ``unrolled`` (:class:`~toolkit.audit.UnrolledLoop`): a loop of the forward, the pass it runs
  written again right after it, backpropagated through every pass: the earlier passes, meant
  to be cut (a one-step or truncated gradient), are not;
- ``shared`` (:class:`~toolkit.audit.SharedTensor`): tensors two optimizers step.

Information (never a failure):

- ``pass_through`` (:class:`~toolkit.audit.Leak` with ``cut_at=None``): tensors the
  gradient passes through on its way to stepped ones, which no cut in the step's code can
  spare (the discriminator in a generator step, a critic in an actor step, and a critic's
  layer that the loss reaches only through the critic's output): backward computes their
  gradient and the optimizer ignores it;
- ``frozen`` (:class:`~toolkit.audit.FrozenTensor`): tensors an optimizer holds that
  do not require grad (skipped by every torch optimizer), and whether the step writes them;
- ``notes``: in-place writes (an average, a copy), leaves of the step that receive gradient,
  the state put back, work run in other threads;
- ``threads``: the threads other than the audit's in which the step ran work (the line that
  started each, the modules run there); carried graphs are then not checked.

Each group has its :class:`~toolkit.audit.kinds.Kind` (:data:`GROUPS`), which says whether it
is a failure; ``StepAudit.findings`` lists every finding with its kind, and each finding's
``proof`` says how its edits were proved (printed under them, and in ``to_dict()``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from toolkit._utils.formatting import fmt
from toolkit.audit.findings import (
    CarriedGraph,
    ConstantTerm,
    CutKeys,
    DeadParameter,
    FrozenTensor,
    HeldGraph,
    Leak,
    SharedTensor,
    TrainedTarget,
    UnrolledLoop,
)
from toolkit.audit.kinds import Kind, Proof

__all__ = ["GROUPS", "StepAudit"]

#: each group of :class:`StepAudit`, in the order the report prints it, and its kind
GROUPS: dict[str, Kind] = {
    "leaks": Kind.LEAK, "targets": Kind.TARGET, "dead": Kind.DEAD, "carried": Kind.CARRIED,
    "unrolled": Kind.CARRIED, "held": Kind.HELD, "constant_terms": Kind.CONSTANT_TERM,
    "cut_keys": Kind.CUT_KEYS, "shared": Kind.SHARED, "pass_through": Kind.PASS_THROUGH,
    "frozen": Kind.SKIPPED}


def _short(path: Iterable[str], keep: int = 10) -> str:
    nodes = list(path)
    if len(nodes) > keep:
        nodes = [*nodes[:3], f"… {len(nodes) - 8} nodes …", *nodes[-5:]]
    return " -> ".join(nodes)


def _portable(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding's dict without the full paths of its lines and edits (nor a line's span:
    its edits say where each expression is)."""
    for key in ("lines", "edits"):
        if finding.get(key):
            finding[key] = [{k: v for k, v in x.items() if k not in ("path", "span")}
                            for x in finding[key]]
    return finding


def _at(lines: Iterable[Any], edits: Iterable[Any] = (),
        proof: Proof = Proof.ADVICE) -> list[str]:
    """``at:   train.py:42: output = netD(fake)``, one per line of the user's code, then
    ``edit: train.py:42: fake -> stop_gradient(fake)``, one per edit of the fix, and how
    they were proved (``proof: verified in process``)."""
    edits = list(edits)
    return [*(f"        at:   {line}" for line in lines),
            *(f"        edit: {edit}" for edit in edits),
            *([f"        proof: {_proved(proof)}"] if edits else [])]


def _proved(proof: Proof) -> str:
    """How edits were proved, in words, and what that leaves to the user."""
    if proof is Proof.ADVICE:
        return f"{proof.text}: not verified, check it before applying it"
    return proof.text


def listing(names: list[str], keep: int = 6) -> str:
    """``a, b, c, … (+4)``."""
    shown = ", ".join(names[:keep])
    return shown + (f", … (+{len(names) - keep})" if len(names) > keep else "")


def plural(n: int, word: str) -> str:
    """``1 loss``, ``2 losses``, ``3 tensors``."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}es" if word.endswith("s") else f"{n} {word}s"


@dataclass(frozen=True, kw_only=True)
class StepAudit:
    """What :func:`audit_step` found; ``str()`` prints it grouped, failures first.

    ``ok`` is ``True`` when there is no leak, trained target, dead parameter, carried graph,
    held graph, constant term or shared tensor. ``pass_through``, ``frozen`` and ``notes``
    are information: they never make ``ok`` false (``audit_step(...,
    allow_pass_through=False)`` counts pass-through as leaks). The module's docstring
    (:mod:`toolkit.audit.result`) says what each kind means; ``to_dict()`` gives every finding
    as a dict of its fields.
    """

    losses: tuple[str, ...]
    leaks: tuple[Leak, ...] = ()
    dead: tuple[DeadParameter, ...] = ()
    carried: tuple[CarriedGraph, ...] = ()
    n_stepped: int = 0
    notes: tuple[str, ...] = field(default=())
    pass_through: tuple[Leak, ...] = ()
    frozen: tuple[FrozenTensor, ...] = ()
    held: tuple[HeldGraph, ...] = ()
    targets: tuple[TrainedTarget, ...] = ()
    shared: tuple[SharedTensor, ...] = ()
    constant_terms: tuple[ConstantTerm, ...] = ()
    cut_keys: tuple[CutKeys, ...] = ()
    unrolled: tuple[UnrolledLoop, ...] = ()
    #: the threads other than the audit's in which the step ran work: its carried graphs are
    #: then not checked (autograd numbers each thread's nodes apart; a note says so)
    threads: tuple[str, ...] = ()

    @property
    def findings(self) -> tuple[tuple[Kind, Any], ...]:
        """Every finding with its kind, in the order the report prints them (failures
        first: see :data:`GROUPS`)."""
        return tuple((kind, f) for group, kind in GROUPS.items() for f in getattr(self, group))

    @property
    def edits(self) -> tuple[Any, ...]:
        """Every edit the failures print, once, in the order they are printed: each was run
        before it was printed (:mod:`toolkit.audit.verify.in_process`) where the step's own
        function holds it, else proved on the recorded graph (each finding's ``proof`` says
        which); ``apply_edits(source, audit.edits)`` writes them."""
        return tuple(dict.fromkeys(e for kind, f in self.findings if kind.failure
                                   for e in f.edits))

    @property
    def safe_edits(self) -> tuple[Any, ...]:
        """The :attr:`edits` whose proof is safe (:attr:`Proof.safe <toolkit.audit.kinds.Proof>`:
        the edited step was run and passed), as ``toolkit audit --apply`` writes only those."""
        return tuple(dict.fromkeys(e for kind, f in self.findings if kind.failure
                                   and f.proof.safe for e in f.edits))

    @property
    def ok(self) -> bool:
        """No failure: no leak, trained target, dead parameter, carried, held graph, constant
        term or shared tensor (the kinds whose :attr:`Kind.failure <toolkit.audit.kinds.Kind>`
        is true)."""
        return not any(kind.failure for kind, _ in self.findings)

    @property
    def not_checked(self) -> tuple[str, ...]:
        """What the audit could not judge, in words: carried graphs when the step ran work in
        other threads."""
        if not self.threads:
            return ()
        return (f"carried graphs: the step ran work in {plural(len(self.threads), 'other thread')}"
                f", whose graph nodes autograd numbers apart",)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: losses, ok, n_stepped, every finding kind (as dicts), notes and the
        threads other than the audit's that ran work. A line of the user's code is its file
        name, number, function, text and enclosing module: not the file's full path, which
        depends on the machine (a run's summary does not)."""
        return {"losses": list(self.losses), "ok": self.ok, "n_stepped": self.n_stepped,
                **{k: [_portable(asdict(x)) for x in getattr(self, k)] for k in GROUPS},
                "notes": list(self.notes), "threads": list(self.threads),
                "not_checked": list(self.not_checked)}

    def _leak_lines(self) -> list[str]:
        groups: dict[tuple[str, str, str], list[Leak]] = {}
        for leak in self.leaks:
            groups.setdefault((leak.loss, leak.reason, leak.fix), []).append(leak)
        lines = []
        for (loss, reason, fix), leaks in groups.items():
            shortest = min(leaks, key=lambda x: len(x.path))
            size = fmt(sum(x.grad_bytes for x in leaks), 'B')
            lines += [f"LEAK    loss {loss!r} reaches {plural(len(leaks), 'tensor')} {reason} "
                      f"({size} of gradient): {listing([x.parameter for x in leaks])}",
                      f"        path: {_short(shortest.path)}",
                      f"        fix:  {fix}", *_at(leaks[0].lines, leaks[0].edits, leaks[0].proof)]
        return lines

    def _target_lines(self) -> list[str]:
        lines = []
        for t in self.targets:
            terms = f", {t.terms} terms" if t.terms > 1 else ""
            lines += [f"TARGET  loss {t.loss!r} ({t.form}{terms}) reads a target that reaches "
                      f"{plural(len(t.parameters), 'tensor')} optimizer {t.optimizer!r} "
                      f"steps: {listing(list(t.parameters))}",
                      f"        path: {_short(t.path)}",
                      f"        fix:  {t.fix}", *_at(t.lines, t.edits, t.proof)]
        return lines

    def _dead_lines(self) -> list[str]:
        groups: dict[tuple[str, str, str | None], list[DeadParameter]] = {}
        for dead in self.dead:
            groups.setdefault((dead.optimizer, dead.cut, dead.line), []).append(dead)
        lines = []
        for (optimizer, cut, line), items in groups.items():
            losses = ", ".join(repr(x) for x in items[0].losses)
            where = "" if line is None else (
                f"; called {line}" if items[0].kind == "no_graph" else f", {line}")
            lines += [f"DEAD    optimizer {optimizer!r} steps {plural(len(items), 'tensor')} "
                      f"that no gradient of {losses} reaches: "
                      f"{listing([x.parameter for x in items])}",
                      f"        cut:  {cut}{where}",
                      *([f"        fix:  {items[0].fix}"] if items[0].fix else []),
                      *_at(items[0].lines, items[0].edits, items[0].proof)]
            with_path = [x for x in items if x.path]
            if with_path:
                best = min(with_path, key=lambda x: len(x.path or ()))
                lines.append(f"        path: {_short(best.path or ())}")
        return lines

    def _carried_lines(self) -> list[str]:
        lines = []
        for c in self.carried:
            shape = "" if c.shape is None else f" of shape {c.shape}"
            lines += [f"CARRIED loss {c.loss!r} reaches {plural(c.n_nodes, 'node')} made "
                      f"{c.created}: {c.source}{shape}, entering at {c.entered}",
                      f"        path: {_short(c.path)}",
                      f"        fix:  {c.fix}", *_at(c.lines, c.edits, c.proof)]
        return lines

    def _unrolled_lines(self) -> list[str]:
        lines = []
        for u in self.unrolled:
            lines += [f"CARRIED loss {u.loss!r} {u.what()}", f"        fix:  {u.fix}",
                      *_at(u.lines, u.edits, u.proof)]
        return lines

    def _held_lines(self) -> list[str]:
        lines = []
        for h in self.held:
            older = f", and {plural(h.older, 'older node')} of earlier steps" if h.older else ""
            name = f"{h.module}{h.name}" if h.name[:1] in ("[", ".", "") else \
                f"{h.module}.{h.name}"
            lines += [f"HELD    {name} ({h.kept_in or h.kind} of shape {h.shape}) holds a "
                      f"grad_fn after the step: {h.written}; it keeps "
                      f"{plural(h.n_nodes, 'node')} of each step's graph alive "
                      f"({fmt(h.graph_bytes, 'B')} saved for backward){older}",
                      f"        fix:  {h.fix}", *_at(h.lines, h.edits, h.proof)]
        return lines

    def _constant_lines(self) -> list[str]:
        lines = []
        for c in self.constant_terms:
            lines += [f"CONST   loss {c.loss!r} {c.what()}", f"        fix:  {c.fix}",
                      *_at(c.lines, c.edits, c.proof)]
        return lines

    def _keys_lines(self) -> list[str]:
        lines = []
        for c in self.cut_keys:
            lines += [f"KEYS    loss {c.loss!r} {c.what()}", f"        fix:  {c.fix}",
                      *_at(c.lines, c.edits, c.proof)]
        return lines

    def _shared_lines(self) -> list[str]:
        return [line for x in self.shared for line in (
            f"SHARED  {plural(len(x.parameters), 'tensor')} stepped by both optimizer "
            f"{x.optimizers[0]!r} and optimizer {x.optimizers[1]!r}: "
            f"{'it moves' if len(x.parameters) == 1 else 'they move'} 2 times per iteration: "
            f"{listing(list(x.parameters))}",
            f"        fix:  {x.fix}", *_at(x.lines, x.edits, x.proof))]

    def _info_lines(self) -> list[str]:
        lines = []
        by_loss: dict[tuple[str, str], list[Leak]] = {}
        for leak in self.pass_through:
            by_loss.setdefault((leak.loss, leak.optimizer), []).append(leak)
        for (loss, optimizer), leaks in by_loss.items():
            size = fmt(sum(x.grad_bytes for x in leaks), 'B')
            # tensors no optimizer steps: they may be meant to train (unfrozen after the
            # optimizer was built from the tensors that required grad then)
            idle = [x.parameter for x in leaks if x.kind == "unstepped"]
            built = next((x.lines[0] for x in leaks if x.lines), None)
            who = "them" if len(idle) == len(leaks) else listing(idle, 4)
            train = "" if not idle else (
                f"; no optimizer given steps {who}: if they should train, add them to "
                f"optimizer {optimizer!r}"
                f"{'' if built is None else f' (built at {built.file}:{built.number})'}")
            lines.append(f"PASS    loss {loss!r} passes through {plural(len(leaks), 'tensor')} "
                         f"optimizer {optimizer!r} does not step ({size} of gradient computed "
                         f"and not used: {listing([x.parameter for x in leaks], 4)}); to skip "
                         f"it, requires_grad_(False) on them around the step (as Lightning's "
                         f"toggle_optimizer does){train}")
        groups: dict[tuple[str, str | None], list[FrozenTensor]] = {}
        for f in self.frozen:
            groups.setdefault((f.optimizer, f.written), []).append(f)
        for (optimizer, written), items in groups.items():
            read = list(dict.fromkeys(r for f in items for r in f.written_from))
            what = ""
            if written:
                kind, _, ops = written.rpartition(" (")
                what = (f"; the step writes {'it' if len(items) == 1 else 'them'} in place: "
                        f"{kind} {listing(read, 4)} ({ops}" if read else
                        f"; the step writes {'it' if len(items) == 1 else 'them'}: {written}")
            verb = "does" if len(items) == 1 else "do"
            lines.append(f"FROZEN  optimizer {optimizer!r} holds "
                         f"{plural(len(items), 'tensor')} that {verb} not require grad (every "
                         f"torch optimizer skips them): {listing([x.parameter for x in items], 4)}"
                         f"{what}")
        return lines

    def __str__(self) -> str:
        losses = ", ".join(repr(n) for n in self.losses)
        ran = "the step ran twice, nothing was stepped"
        if self.ok:
            reached = self.n_stepped - len(self.frozen)
            frozen = f" ({len(self.frozen)} frozen)" if self.frozen else ""
            carried = "carried graphs not checked (other threads)" if self.threads else \
                "no carried graph"
            head = (f"audit_step: clean; {plural(len(self.losses), 'loss')} ({losses}), "
                    f"{reached} stepped tensors all reached{frozen}, no leak, {carried} "
                    f"({ran})")
            return "\n".join([head, *self._info_lines(), *[f"note: {n}" for n in self.notes]])
        counts = [(len(self.leaks), "leaking tensor"), (len(self.targets), "trained target"),
                  (len(self.dead), "dead parameter"), (len(self.carried), "carried graph"),
                  (len(self.unrolled), "uncut unroll"),
                  (len(self.held), "held graph"), (len(self.constant_terms), "constant term"),
                  (len(self.cut_keys), "cut key"),
                  (sum(len(x.parameters) for x in self.shared), "shared tensor")]
        failing = {x.loss for kind in (self.leaks, self.targets, self.carried,
                                       self.constant_terms, self.cut_keys, self.unrolled)
                   for x in kind}
        failing |= {loss for x in self.dead for loss in x.losses}
        named = ", ".join(repr(n) for n in self.losses if n in failing)
        where = f"losses {named}" if named else f"losses {losses}"
        head = (f"audit_step: {', '.join(plural(n, w) for n, w in counts if n)} "
                f"({where}; {ran})")
        return "\n".join([head, *self._leak_lines(), *self._target_lines(), *self._dead_lines(),
                          *self._carried_lines(), *self._unrolled_lines(), *self._held_lines(),
                          *self._constant_lines(), *self._keys_lines(), *self._shared_lines(),
                          *self._info_lines(),
                          *[f"note: {n}" for n in self.notes],
                          *[f"not checked: {n}" for n in self.not_checked]])
