"""What the audit finds: the step audit's findings, one frozen dataclass per kind, and the
script audit's :class:`ScriptFinding`, one typed class for every kind it reports; both typed
by :class:`~toolkit.audit.kinds.Kind` and :class:`~toolkit.audit.kinds.Proof`, both carrying
the one :class:`~toolkit.audit.edit.Edit`.

Failures (they make :attr:`~toolkit.audit.StepAudit.ok` false): :class:`Leak`,
:class:`TrainedTarget`, :class:`DeadParameter`, :class:`CarriedGraph`, :class:`HeldGraph`,
:class:`SharedTensor`, :class:`ConstantTerm`, :class:`UnrolledLoop`. Information: :class:`FrozenTensor`, and
:class:`Leak` as pass-through.

Every failure with a fix carries ``line``: where in the user's code the fix goes
(``"train.py:42: output = netD(fake)"``), found by :mod:`toolkit.audit.fixes.location` and
checked by :mod:`toolkit.audit.fixes.proof`, or ``None`` when no proved fix is known; and
``edits``: the fix as edits of those lines (:class:`~toolkit.audit.edit.Edit`: the
expression, and what to write instead), one per cut, or ``()`` when the audit cannot say
every expression exactly.

Every finding carries ``proof``, how its edits were proved (:class:`~toolkit.audit.kinds.Proof`):
``Proof.IN_PROCESS`` when the edited step was run again in this process and passed
(:mod:`toolkit.audit.verify.in_process`), ``Proof.GRAPH`` when the cut was proved on the recorded
graph only (the default of a finding with edits: every edit a rule makes is), and
``Proof.ADVICE`` when there is no edit (only ``lines`` and ``fix``, or information). Sub-kinds
(``Leak.kind``, ``DeadParameter.kind``, ``HeldGraph.kind``) are the string enums of
:mod:`toolkit.audit.kinds`; a plain string is coerced to its member, and one that names none is
a ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolkit.audit.edit import Edit
from toolkit.audit.kinds import (
    SCRIPT_KINDS,
    DeadKind,
    HeldKind,
    Kind,
    LeakKind,
    Proof,
    UnrollKind,
    coerce,
)
from toolkit.audit.record.sites import Line

__all__ = ["CarriedGraph", "ConstantTerm", "CutKeys", "DeadParameter", "FrozenTensor",
           "HeldGraph", "Leak", "ScriptFinding", "SharedTensor", "TrainedTarget", "UnrolledLoop",
           "first_names"]

#: the proofs a step finding's edits can have (a script is never rerun by the step audit)
STEP_PROOFS = frozenset({Proof.IN_PROCESS, Proof.GRAPH, Proof.ADVICE})


def _settle(finding: Any, kinds: type[Any] | None = None) -> None:
    """Coerce ``finding.kind`` to ``kinds`` and set its ``proof``: ``ADVICE`` without edits,
    ``GRAPH`` for edits of no stated proof, else the proof given (as a :class:`Proof`)."""
    name = type(finding).__name__
    if kinds is not None:
        object.__setattr__(finding, "kind", coerce(kinds, finding.kind, f"{name}.kind"))
    edits = getattr(finding, "edits", ())
    proof = (Proof.ADVICE if not edits else Proof.GRAPH if finding.proof is None
             else coerce(Proof, finding.proof, f"{name}.proof", STEP_PROOFS))
    object.__setattr__(finding, "proof", proof)


def _cut_where(cut: str, taken: Line | None, edits: tuple[Edit, ...]) -> str:
    """How and where values were cut (``cut``: ``"no_grad"`` or ``"detach"``, at ``taken``),
    with the values' own names where the edits that remove the cuts give them
    (```dist_mat```)."""
    how = "computed under torch.no_grad()" if cut == "no_grad" else ".detach()ed"
    at = "" if taken is None else f" at {taken.file}:{taken.number}"
    names = [e.new for e in edits if cut == "detach" and e.new.replace(".", "_").isidentifier()]
    if names:
        at += f" ({', '.join(f'`{n}`' for n in dict.fromkeys(names))})"
    return how + at


def first_names(names: tuple[str, ...] | list[str], keep: int = 4) -> str:
    """``a, b, c, d, … (6 in all)``: the first ``keep`` names, and how many there are."""
    return ", ".join(names[:keep]) + (f", … ({len(names)} in all)" if len(names) > keep
                                      else "")


@dataclass(frozen=True)
class Leak:
    """Gradient of ``loss`` reaches ``parameter``, which ``optimizer`` does not step.

    The same type serves :attr:`StepAudit.leaks` (failures: a cut can remove the gradient, or
    the tensor is stepped *and* written in place by the step) and
    :attr:`StepAudit.pass_through` (information: every cut that removes it also cuts a stepped
    tensor off the loss, e.g. the discriminator in a generator step).

    ``path``: the shortest chain of node names from the loss to the parameter (modules named,
    disabled blocks named); ``grad_bytes``: the gradient it gets (``numel × element size``);
    ``reason``: why it counts; ``fix``: the likely fix; ``cut_at``: where to cut (``None`` when
    no cut can remove it). A reparametrised weight (``parametrize``, the ``spectral_norm`` /
    ``weight_norm`` hooks) is named by its stored tensor (``weight_orig``,
    ``parametrizations.weight.original``); no cut is ever proposed inside its computation.

    ``kind``: what the fix is, as one word (a :class:`~toolkit.audit.kinds.LeakKind`):
    ``"cut"`` (a cut at ``cut_at``), ``"written"``
    (stepped and written in place by the step: one of the two goes), ``"optimizer"`` (at the
    line that builds the optimizer: a tensor left out of it, a module replaced after it was
    built), ``"detached"`` (a ``.detach()`` of the step keeps the loss from what it trains: remove
    it), ``"no_target"`` (the loss reaches none of the tensors its optimizer steps: fixed
    where the DEAD finding says), ``"no_cut"`` (no cut in the step's code removes it),
    ``"pass_through"`` (every cut that removes it also cuts a stepped tensor off the loss) or
    ``"unstepped"`` (pass-through, and stepped by no optimizer given: perhaps meant to train).
    """

    loss: str
    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    grad_bytes: int
    path: tuple[str, ...]
    reason: str
    fix: str
    cut_at: str | None
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    kind: LeakKind = LeakKind.CUT
    proof: Proof | None = None

    def __post_init__(self) -> None:
        _settle(self, LeakKind)


@dataclass(frozen=True)
class TrainedTarget:
    """Loss ``loss`` compares a prediction with a target that also reaches ``parameters``,
    tensors that ``optimizer`` steps: gradient flows through the target.

    ``form``: what the audit recognised (``"MseLoss"``, ``"(a - b) ** 2"``, ``"a
    log-probability times a weight that carries gradient"``, ``"a target bootstrapped from
    other rows of the same forward ((a - b) ** 2)"`` for V-trace or GAE targets, ``"a cosine
    similarity of two views, neither side cut"`` for SimSiam's ``D(p, z)`` with no
    stop-gradient); ``target``: the target side
    (``"the output of Add (shape (8,))"``); ``parameters``: the stepped tensors both sides
    reach (for a log-probability's weight: that the weight reaches); ``path``: loss -> the
    comparison -> the target side; ``fix``: cut the target; ``terms``: how many terms of the
    loss have this form and these parameters (one per time step of an episode).
    """

    loss: str
    optimizer: str
    form: str
    target: str
    parameters: tuple[str, ...]
    path: tuple[str, ...]
    fix: str
    terms: int = 1
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None

    def __post_init__(self) -> None:
        _settle(self)


@dataclass(frozen=True)
class DeadParameter:
    """``optimizer`` steps ``parameter`` but none of its ``losses`` reaches it.

    ``cut``: what stops it (``"stop_gradient 'dqn.target'"``, ``".detach() of the output of
    encoder (shape (8, 16))"``, ``"torch.no_grad()"``, ``"requires_grad=False"``, ``"not used"``
    ...); ``path``: the loss-to-parameter chain through that cut when one is known.
    ``kind``: the cut as one word (a :class:`~toolkit.audit.kinds.DeadKind`): ``"block"``
    (a toolkit ``stop_gradient``), ``"detach"``
    (``.detach()``, ``.data``), ``"copy"`` (``copy.deepcopy`` of the model: the copy is new
    leaves), ``"zero_derivative"`` (reached only through ``torch.sign``, ``round`` and the
    like, whose gradient is exactly zero), ``"cancelled"`` (reached, and the gradients that
    arrive by two paths cancel exactly on both calls, as a real backward shows: ``soft +
    (hard - soft)``, a straight-through line without its cut; ``lines`` is where they meet),
    ``"no_grad"``, ``"library_argument"`` (read
    inside a library call that runs with gradients off and trains only what one of its
    arguments names, left out: ``odeint_adjoint`` without ``adjoint_params=``; ``lines`` is
    the user's call), ``"value_copy"`` (``torch.tensor(...)`` of a tensor computed from it:
    values copied without their graph), ``"frozen"`` (``requires_grad=False``),
    ``"integer_result"`` (its values reach the step only as an integer or boolean result,
    ``argmax`` or a comparison, which passes no gradient: ``lines`` is where it is made),
    ``"first_order"`` (what it computes was differentiated by ``torch.autograd.grad``
    without ``create_graph=True``, and reaches the loss only as that gradient, a constant:
    forces as ``-dE/dx``; ``lines`` is that call),
    ``"not_used"`` (never read), ``"written"`` (written in place by the step from other
    tensors, an EMA teacher kept in the optimizer: left out of it), ``"replaced"`` (held by a module replaced after the optimizer
    was built: ``lines`` is the line that builds it) or ``"no_graph"`` (read, but what it
    computes never reaches the loss: an output left out of the loss); ``line``: where in the step's code the cut was
    made, or where its module was called for ``"no_graph"`` (``"at model.py:42 (forward)"``),
    when known.
    """

    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    losses: tuple[str, ...]
    cut: str
    path: tuple[str, ...] | None
    kind: DeadKind = DeadKind.NO_GRAPH
    line: str | None = None
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    fix: str = ""
    proof: Proof | None = None

    def __post_init__(self) -> None:
        _settle(self, DeadKind)


@dataclass(frozen=True)
class FrozenTensor:
    """``optimizer`` holds ``parameter``, which does not require grad: every torch optimizer
    skips it. Information, never a failure (SimSiam's unused bias, MoCo's key encoder).

    ``written``: how the step writes it in place, if it does (``"an average of itself and
    (.data =)"`` for an EMA copy, ``"a copy of (copy_)"``); ``written_from``: the tensors those
    writes read (``("encoder_q.0.weight",)``); ``by_step``: the step itself set
    ``requires_grad_(False)``.
    """

    optimizer: str
    parameter: str
    shape: tuple[int, ...]
    written: str | None
    by_step: bool
    written_from: tuple[str, ...] = ()
    proof: Proof | None = None

    def __post_init__(self) -> None:
        _settle(self)


@dataclass(frozen=True)
class CarriedGraph:
    """The second call's graph reaches graph made before it: state carried without a cut.

    ``shape``: the carried tensor's shape; ``source``: what made it; ``entered``: the node of
    the second call that reads it; ``path``: loss → … → the carried node; ``created``: ``"the
    first call"`` or ``"before the audit"``; ``n_nodes``: old nodes reachable through it;
    ``container``: the list, deque or dict (as the user's code names it) that keeps the
    carried tensor beside the new call's entries (``""``: none).
    """

    loss: str
    shape: tuple[int, ...] | None
    source: str
    entered: str
    path: tuple[str, ...]
    created: str
    n_nodes: int
    fix: str
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None
    container: str = ""

    def __post_init__(self) -> None:
        _settle(self)


@dataclass(frozen=True)
class HeldGraph:
    """After the step, ``module``'s buffer or attribute ``name`` holds a ``grad_fn``; or a
    list, dict, global, closure variable or plain object the step refers to keeps the graph
    of both calls (``module`` is then the name the step reads, ``name`` the rest of the path:
    ``history`` and ``[1]``; see :mod:`toolkit.audit.rules.kept`).

    ``kind``: a :class:`~toolkit.audit.kinds.HeldKind`: ``"buffer"``, ``"attribute"`` or
    ``"parameter"`` (one that does not require grad, written in place from one that does), or
    ``"kept"`` for a place outside modules, with ``kept_in`` saying which (``"an item of a list
    kept in a global"``). ``written``: what wrote it (``"add_ in the
    forward of flow.1"``, ``"assigned a tensor made by Add"``); ``graph_bytes``: bytes the
    step's own nodes behind it save for backward (what each further step adds);
    ``n_nodes``: those nodes; ``older``: nodes from before the step that it also keeps (the
    previous steps' graph, through the previous value); ``fix``: where to cut.
    """

    module: str
    name: str
    kind: HeldKind
    shape: tuple[int, ...]
    written: str
    graph_bytes: int
    n_nodes: int
    older: int
    fix: str
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None
    kept_in: str = ""

    def __post_init__(self) -> None:
        _settle(self, HeldKind)


@dataclass(frozen=True)
class SharedTensor:
    """Two distinct optimizers, ``optimizers``, both hold ``parameters``: each of their
    ``step()`` calls updates them, so they move twice per iteration (with two learning rates
    and two sets of moments). One finding per pair of optimizers; ``shapes``: each tensor's
    shape; ``lines``: where each of the two is built, when found; ``fix``: keep them in one.
    Losses paired with param groups, modules or tensors of one optimizer step nothing twice
    (torch refuses a tensor in two groups of one optimizer): no finding."""

    parameters: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    optimizers: tuple[str, str]
    fix: str
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None

    def __post_init__(self) -> None:
        _settle(self)


@dataclass(frozen=True)
class ConstantTerm:
    """A term of ``loss`` that is a constant: the scalars the user's code names ``tensors``
    (``r1_penalty``) were computed from the gradient that ``torch.autograd.grad`` took without
    ``create_graph=True`` (``taken``), and added to the loss at ``added``. That gradient has
    no graph, so neither has the term: it adds to the loss's value and nothing to its gradient,
    and the penalty trains none of ``through``, the stepped tensors the gradient was taken
    through (WGAN-GP's, R1's or a Jacobian penalty written without ``create_graph=True``).
    ``lines``: the ``autograd.grad`` call, where the fix (``create_graph=True``) goes.

    ``cut``: ``""`` for that form; ``"no_grad"`` or ``"detach"`` for a term made only of a
    network's output cut there (``taken``: the ``with torch.no_grad():`` or the ``.detach()``)
    and of data: a second view's regulariser, a second pass's cross-entropy, which train none
    of ``through``, the network's stepped tensors; the fix removes the cut. ``"self"`` for a
    value subtracted from itself with its graph at ``added`` (``taken``: where the value
    subtracted was bound, ``old_logp = logp``): zero whatever the weights, the terms made of
    it train none of ``through``; the fix cuts the value subtracted. ``"cancel"`` for a value
    added to a difference that subtracts it (``z + (z_q - z)``, ``tensors`` the two operands):
    the value's gradient through the sum cancels, and ``through``, what computed it, get none
    from it; the fix cuts the difference. ``"leaf"`` for a term made only of stepped tensors'
    own values read cut (``p.data``, ``p.detach()``: NICE's log-determinant of its scales, an
    L2 penalty of ``p.data``): the fix reads them whole."""

    loss: str
    tensors: tuple[str, ...]
    through: tuple[str, ...]
    taken: Line | None
    added: Line | None
    fix: str
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None
    cut: str = ""

    def __post_init__(self) -> None:
        _settle(self)

    def what(self) -> str:
        """What the loss adds, in words, after its name: both reports print it."""
        term = ", ".join(self.tensors) or "a term"
        added = "" if self.added is None else f" ({self.added.file}:{self.added.number})"
        at = "" if self.taken is None else f" at {self.taken.file}:{self.taken.number}"
        through = first_names(self.through)
        if self.cut == "self":
            at = "" if self.taken is None or self.taken == self.added else \
                f", the second bound to the first at {self.taken.file}:{self.taken.number}"
            pair = f"`{self.tensors[0]}` and `{self.tensors[1]}`" \
                if len(self.tensors) == 2 else "a value and itself"
            return (f"takes the difference or the ratio of {pair}{added}, one value with one "
                    f"graph on both sides{at}: the result is zero or one whatever the "
                    f"weights, and its gradient zero; the "
                    f"terms made of it train none of the {len(self.through)} tensors it was "
                    f"computed by ({through})")
        if self.cut == "cancel":
            pair = f"`{self.tensors[0]}` to `{self.tensors[1]}`" \
                if len(self.tensors) == 2 else "a value to a difference that subtracts it"
            return (f"adds {pair}{added}, a difference that subtracts the value added, with "
                    f"its graph: the value's gradient through the sum cancels, and none of "
                    f"the {len(self.through)} tensors it was computed by ({through}) gets "
                    f"gradient from this loss through it (a straight-through estimator cuts "
                    f"the difference)")
        if self.cut == "leaf":
            return (f"adds {term}{added}, made only of the values of tensors it steps, read "
                    f"cut{at} (`.data`, `.detach()`): a constant, it trains none of the "
                    f"{len(self.through)} tensors it was computed by ({through}), which the "
                    f"rest of the loss trains")
        if self.cut:
            return (f"adds {term}{added}, made only of a network's output "
                    f"{_cut_where(self.cut, self.taken, self.edits)}: a "
                    f"constant, it trains none of the {len(self.through)} tensors it was "
                    f"computed by ({through})")
        return (f"adds {term}{added}, made from the gradient torch.autograd.grad took{at} "
                f"without create_graph=True: a constant, it trains none of the "
                f"{len(self.through)} tensors it was taken through ({through})")


@dataclass(frozen=True)
class CutKeys:
    """The keys of a loss over several keys, cut: ``loss`` compares queries with keys at
    ``read`` (a similarity or distance matrix, then a softmax over the keys: InfoNCE, NT-Xent,
    a prototypical network's distances), and the keys were computed by a network the loss's
    optimizer steps, then cut (``cut``: ``"detach"`` or ``"no_grad"``, at ``taken``). The loss
    pulls and pushes the queries alone, and trains ``through`` only on the query side: the
    methods that compute their keys with the network they train in the same step (SimCLR, CPC,
    prototypical networks, SupCon, CLIP's two towers) train through both. Keys from another
    network (MoCo's momentum encoder, a frozen tower) or from earlier steps (a memory bank, a
    queue) are no finding. The fix removes the cuts.

    ``ranked``: the keys are one side of pairs the loss ranks, a difference it reads through
    a logistic or a hinge (a reward model's ``-logsigmoid(r_chosen - r_rejected)``, BPR,
    RankNet, a margin): the loss pushes the other side alone."""

    loss: str
    through: tuple[str, ...]
    taken: Line | None
    read: Line | None
    cut: str
    fix: str
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None
    ranked: bool = False
    #: the name the cut side is assigned to, where one statement computes it (``pol_synth``)
    side: str | None = None

    def __post_init__(self) -> None:
        _settle(self)

    def what(self) -> str:
        """What the loss reads, in words, after its name: both reports print it."""
        read = "" if self.read is None else f" ({self.read.file}:{self.read.number})"
        if self.ranked:
            side = "" if self.side is None else f" (`{self.side}`)"
            return (f"ranks pairs of scores by their difference{read}, one side{side} "
                    f"{_cut_where(self.cut, self.taken, self.edits)}, made by a network its "
                    f"optimizer steps: the loss pushes the other side alone and trains none "
                    f"of the {len(self.through)} tensors through the cut side "
                    f"({first_names(self.through)})")
        return (f"compares its queries with keys{read} "
                f"{_cut_where(self.cut, self.taken, self.edits)}, made by a network its "
                f"optimizer steps: the loss over those keys trains none of the "
                f"{len(self.through)} tensors through them ({first_names(self.through)}), "
                f"only through its queries")


@dataclass(frozen=True)
class UnrolledLoop:
    """``loss`` backpropagates through every pass of an iteration in the forward whose earlier
    passes were meant to be cut (a one-step or truncated gradient, a refinement trained pass by
    pass), and are not.

    ``kind``: a :class:`~toolkit.audit.kinds.UnrollKind`, what shows the cut was meant:
    ``"split"``, the loop's pass written again right after it
    (:mod:`toolkit.audit.record.unrolls`); ``"sampled"``, an estimate the loss compares at each
    pass read, uncut, as the positions where the next pass samples (RAFT's refinement).
    ``state``: what the passes hand on, as the code names it; ``cut``: where the fix goes (the
    statement of the earlier passes that assigns it, or the line where each pass reads it);
    ``shown_by``: the first line of the repeated pass, or the sampling line; ``n_nodes``: the
    nodes of the earlier passes the loss reaches that way (for ``"sampled"``: the estimates
    read); ``parameters``: the stepped tensors it trains through them."""

    loss: str
    kind: UnrollKind
    state: str
    cut: Line
    shown_by: Line
    n_nodes: int
    parameters: tuple[str, ...]
    fix: str
    lines: tuple[Line, ...] = ()
    edits: tuple[Edit, ...] = ()
    proof: Proof | None = None

    def __post_init__(self) -> None:
        _settle(self, UnrollKind)

    def what(self) -> str:
        """What the loss does, in words, after its name: both reports print it."""
        trained = first_names(self.parameters)
        if self.kind is UnrollKind.SAMPLED:
            return (f"compares `{self.state}` with a target at each pass and reads it, uncut, "
                    f"as the positions sampled at {self.shown_by.file}:{self.shown_by.number} "
                    f"({self.n_nodes} estimates, training {trained}): each later pass trains "
                    f"the earlier ones through where they sample")
        return (f"backpropagates through every pass of the loop at {self.cut.file}:"
                f"{self.cut.number}, which {self.shown_by.file}:{self.shown_by.number} repeats "
                f"({self.n_nodes} nodes of the earlier passes, training {trained}): "
                f"`{self.state}` is handed on uncut")


@dataclass
class ScriptFinding:
    """One finding: ``kind`` (a :class:`~toolkit.audit.kinds.Kind` of
    :data:`~toolkit.audit.kinds.SCRIPT_KINDS`; a string is coerced to it), the iteration it
    first appeared in (0-based), a one-line message, the tensors it is about (stable keys
    ``opt<i>.<group>.<index>``, or a module name for tensors no optimizer steps) and their
    names, the user's lines, the edits that fix it, and whether those edits were verified by
    running the edited script (``verified``; ``proof`` says it as a
    :class:`~toolkit.audit.kinds.Proof`)."""

    kind: Kind
    iteration: int
    message: str
    tensors: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    at: tuple[str, ...] = ()
    edits: tuple[Edit, ...] = ()
    advice: str = ""
    step: int = -1                      # the optimizer step event it was found at
    concerned: tuple[str, ...] = ()     # tensors whose gradient the fix may change
    verified: bool | None = None
    why_not: str = ""
    cost_bytes: int = 0
    extra: dict = field(default_factory=dict)
    values: tuple[str, ...] = ()        # the values a cut makes, as the script names them

    def __post_init__(self) -> None:
        self.kind = coerce(Kind, self.kind, "ScriptFinding.kind", SCRIPT_KINDS)

    @property
    def failure(self) -> bool:
        return Kind(self.kind).failure

    @property
    def proof(self) -> Proof:
        """``RERUN`` when the edits were verified by rerunning the script on copies from the
        same seed; otherwise ``ADVICE`` (no edit, an edit whose rerun did not pass, or one not
        run: ``--no-verify``, or not yet). ``--apply`` writes only edits whose proof is safe."""
        return Proof.RERUN if self.verified and self.edits else Proof.ADVICE

    @property
    def key(self) -> tuple:
        return (self.kind, self.at, self.tensors)

    def to_dict(self) -> dict:
        """The finding as ``report.json`` holds it (:class:`toolkit.audit.schema.Finding`)."""
        return {"kind": str(self.kind), "failure": self.failure, "proof": str(self.proof),
                "verified": self.verified, "why_not": self.why_not,
                "iteration": self.iteration, "step": self.step, "message": self.message,
                "tensors": list(self.tensors), "names": list(self.names),
                "values": list(self.values), "at": list(self.at), "advice": self.advice,
                "edits": [e.to_dict() for e in self.edits]}

    def lines(self) -> list[str]:
        """The finding as the report prints it: each edit with how it was proved."""
        head = "FAIL" if self.failure else "info"
        out = [f"{head:<7} {self.kind}: {self.message} (iteration {self.iteration})"]
        if self.names:
            shown = ", ".join(self.names[:6]) + (f", … ({len(self.names)} in all)"
                                                  if len(self.names) > 6 else "")
            out.append(f"        tensors: {shown}")
        if self.values:
            out.append(f"        values:  {', '.join(self.values)}")
        out += [f"        at:   {a}" for a in self.at]
        if self.proof.safe:
            out += [f"        edit: {e}" for e in self.edits]
            out.append("        verified: the edited script, rerun from the same seed, no longer "
                       "shows it and keeps every other gradient")
            out.append(f"        proof: {self.proof.text} (--apply writes it)")
        else:
            if self.advice:
                out.append(f"        fix:  {self.advice}")
            if self.edits and self.verified is False:
                out.append(f"        not verified: {self.why_not}")
                out.append(f"        proof: {self.proof.text} (--apply does not write it)")
            elif self.failure and not self.edits:
                out.append("        not verified: no edit could be written for it")
        return out
