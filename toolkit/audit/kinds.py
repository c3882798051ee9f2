"""The audit's vocabulary, defined once for both engines: what kind of finding it is
(:class:`Kind`, each a failure or information), how its edits were proved (:class:`Proof`, as
ruff marks a fix safe or unsafe), and the step audit's sub-kinds (:class:`LeakKind`,
:class:`DeadKind`, :class:`HeldKind`, :class:`UnrollKind`).

Each is a :class:`enum.StrEnum`: a member equals its value (``Kind.LEAK == "leak"``), prints as
it and is written to JSON as it. A finding made with a plain string is coerced to the member by
:func:`coerce`, and a string that names no member is a :class:`ValueError` that lists those
that exist.

>>> Kind("stale").failure, Kind.WASTED.failure
(True, False)
>>> Proof.RERUN.safe, Proof.GRAPH.safe
(True, False)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TypeVar

__all__ = ["FAILURES", "SAFE", "SCRIPT_KINDS", "STEP_KINDS", "DeadKind", "HeldKind", "Kind",
           "LeakKind", "Proof", "UnrollKind", "coerce"]


class _Described(enum.StrEnum):
    """A string enum whose members carry a one-line meaning (their ``__doc__``)."""

    def __new__(cls, value: str, doc: str = "") -> _Described:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = doc
        return member


class Kind(enum.StrEnum):
    """What a finding is, for both engines: :func:`~toolkit.audit.audit_step` (one step, run
    twice) and ``toolkit audit SCRIPT`` (a script run unchanged). ``failure``: it changes what
    the script trains (a failure makes the audit fail), else it is information.
    :data:`STEP_KINDS` and :data:`SCRIPT_KINDS` say which engine reports which."""

    failure: bool

    def __new__(cls, value: str, failure: bool, doc: str) -> Kind:
        member = str.__new__(cls, value)
        member._value_ = value
        member.failure = failure
        member.__doc__ = doc
        return member

    # both engines
    LEAK = "leak", True, ("a loss's gradient reaches tensors its optimizer does not step (the "
                          "step), or another loss's gradient is in .grad when an optimizer "
                          "steps (the script)")
    TARGET = "target", True, "a comparison's target side carries gradient to stepped tensors"
    DEAD = "dead", True, "a stepped tensor that no loss's gradient reaches"
    CARRIED = "carried", True, ("the graph reaches graph made by an earlier call or iteration, "
                                "or by earlier passes of an iteration meant to be cut "
                                "(``unrolled``)")
    SHARED = "shared", True, "a tensor that two optimizers step"
    HELD = "held", True, ("a module's buffer or attribute, or a list, dict, global or closure "
                          "variable, holds the step's graph after it")
    CONSTANT_TERM = "constant_term", True, ("a term of a loss made from a gradient taken by "
                                            "torch.autograd.grad without create_graph=True, "
                                            "or only from a network's output cut (no_grad, "
                                            ".detach()), or only from stepped tensors' values "
                                            "read cut (p.data): a constant, it trains "
                                            "nothing; or "
                                            "one that reads a value cut from what the rest "
                                            "of the loss trains, whose own gradient no step "
                                            "uses")
    CUT_KEYS = "cut_keys", True, ("the keys a loss over several keys reads (a contrastive or "
                                  "prototype loss) cut from a network the loss's optimizer "
                                  "steps: it trains that network through its queries alone")
    # the step audit
    PASS_THROUGH = "pass_through", False, ("tensors the gradient passes through on its way to "
                                           "stepped ones, which no cut in the step can spare")
    SKIPPED = "skipped", False, ("an optimizer holds a tensor that does not require grad: "
                                 "every torch optimizer skips it")
    # the script audit
    STALE = "stale", True, ("gradient of an earlier iteration, or of weights the script has "
                            "moved since (no zero_grad), in .grad at a step")
    CLEARED = "cleared", True, ("the step's own gradient cleared before the step used it, or "
                                "a backward's gradient cleared before any step read it")
    UNSTEPPED = "unstepped", True, ("gradient reaches tensors of a trained model that no "
                                    "optimizer steps")
    FROZEN = "frozen", True, "held by an optimizer, requires_grad switched off mid-run"
    UNLEARNED = "unlearned", True, ("a layer's buffer or plain tensor that nothing writes, beside "
                                    "a parameter of the same role for the layer's other half "
                                    "(weight_sigma beside bias_sigma), or that only a clamp "
                                    "writes (CLIP's logit scale): a learned tensor no gradient "
                                    "reaches")
    TRAINED_MASK = "trained_mask", True, ("a parameter of zeros and ones multiplied into a "
                                          "weight of its shape (a pruning mask), stepped by an "
                                          "optimizer with a gradient")
    NEVER_TRAINED = "never_trained", True, ("held by an optimizer, its gradient cleared or "
                                            "itself switched off under a condition on the "
                                            "run's progress at every step of the run: a freeze "
                                            "that never ended")
    ALIASED = "aliased", True, ("a target read under no_grad that is the trained network "
                                "itself, a shallow copy of what holds a trained network, or a "
                                "snapshot that shares its storage with the tensors it was "
                                "taken from")
    DRAWN = "drawn", True, ("a sample drawn without its path (``Distribution.sample``) from "
                            "parameters with a graph, which a loss that trains reads and no "
                            "log-probability weighs (or, weighed, that a term of the loss "
                            "reads whose own gradient no step uses): the loss never trains "
                            "what made the distribution through it, where ``rsample`` keeps "
                            "the reparameterised path")
    VOID_CUT = "void_cut", True, ("a ``.detach()`` whose result nothing reads, while the loss "
                                  "reaches stepped tensors through the value it was written "
                                  "to cut")
    TRUNCATED = "truncated", True, ("a recurrent state cut by ``.detach()`` inside the unroll "
                                    "one loss reads whole: backpropagation through time "
                                    "truncated to one step")
    UNCLIPPED = "unclipped", True, ("a gradient clip (clip_grad_norm_, clip_grad_value_) run "
                                    "before the backward() whose gradient the step uses: it "
                                    "clips nothing, and the step goes on unclipped")
    WASTED = "wasted", False, "gradient written and cleared before any step used it"
    HAND_UPDATED = "hand_updated", False, ("stepped, no gradient, moved by the script itself "
                                           "(an EMA copy, a renormalisation in place)")
    IDLE = "idle", False, ("stepped, no gradient, of a module no forward ran since its last "
                           "step that runs at another time (a part another phase trains)")
    UNUSED = "unused", False, ("stepped, no gradient, of a module whose forward ran with a graph "
                               "no loss read, while the step trained the optimizer's other "
                               "tensors (an output the method leaves out)")
    SWITCHED_OFF = "switched_off", False, ("stepped, no gradient, cut by a no_grad branch of "
                                           "the script's own switch whose other branch, "
                                           "making the same call with a graph, trained them "
                                           "earlier in the run (a part a later phase freezes)")


#: the kinds that are failures; every other kind is information
FAILURES: frozenset[Kind] = frozenset(k for k in Kind if k.failure)
#: the kinds :func:`~toolkit.audit.audit_step` reports (:class:`~toolkit.audit.StepAudit`)
STEP_KINDS: frozenset[Kind] = frozenset({
    Kind.LEAK, Kind.TARGET, Kind.DEAD, Kind.CARRIED, Kind.HELD, Kind.CONSTANT_TERM, Kind.SHARED,
    Kind.CUT_KEYS, Kind.PASS_THROUGH, Kind.SKIPPED})
#: the kinds ``toolkit audit SCRIPT`` reports
SCRIPT_KINDS: frozenset[Kind] = frozenset({
    Kind.LEAK, Kind.STALE, Kind.CLEARED, Kind.DEAD, Kind.CARRIED, Kind.HELD, Kind.UNSTEPPED,
    Kind.SHARED, Kind.FROZEN, Kind.UNLEARNED, Kind.TRAINED_MASK, Kind.NEVER_TRAINED,
    Kind.ALIASED, Kind.TARGET, Kind.CONSTANT_TERM, Kind.CUT_KEYS, Kind.DRAWN, Kind.VOID_CUT,
    Kind.TRUNCATED, Kind.UNCLIPPED, Kind.WASTED, Kind.HAND_UPDATED, Kind.IDLE, Kind.UNUSED,
    Kind.SWITCHED_OFF})


class Proof(enum.StrEnum):
    """How a finding's edits were proved. ``safe``: the edits were run and showed the fix works
    (``--apply`` writes them); the others are shown for the user to judge, never written.
    ``text``: the proof in words, as the reports print it."""

    safe: bool
    text: str

    def __new__(cls, value: str, safe: bool, text: str, doc: str) -> Proof:
        member = str.__new__(cls, value)
        member._value_ = value
        member.safe, member.text = safe, text
        member.__doc__ = doc
        return member

    RERUN = "rerun", True, "verified by rerunning the script", (
        "the script's files copied, the edits made in the copies, and the copy audited again in "
        "a fresh process from the same seed: the finding gone, nothing new found, every other "
        "gradient the same, the tensors it is about trained")
    IN_PROCESS = "in_process", True, "verified in process", (
        "the edited functions installed in this process and the step audited again from the "
        "same state: the finding gone, nothing new found, every other stepped tensor's gradient "
        "the same, the tensors it is about trained")
    GRAPH = "graph", False, "proved on the recorded graph", (
        "the cut applied to the recorded backward graph: the finding is gone from it and every "
        "stepped tensor is still reached; the edited code itself was not run (an edit of an "
        "__init__, or of a line the step does not run again)")
    ADVICE = "advice", False, "advice only", (
        "not proved: where the fix goes and what to decide there, or edits whose run did not "
        "pass or was not made (--no-verify)")


#: the proofs whose edits ``--apply`` writes
SAFE: frozenset[Proof] = frozenset(p for p in Proof if p.safe)


class LeakKind(_Described):
    """What the fix of a :class:`~toolkit.audit.Leak` is, as one word."""

    CUT = "cut", "a cut at the leak's cut_at"
    WRITTEN = "written", ("stepped and written in place by the step: one of the two goes")
    OPTIMIZER = "optimizer", ("at the line that builds the optimizer: a tensor left out of it, "
                              "a module replaced after it was built")
    DETACHED = "detached", "a .detach() of the step keeps the loss from what it trains"
    NO_TARGET = "no_target", ("the loss reaches none of the tensors its optimizer steps: fixed "
                              "where the dead finding says")
    NO_CUT = "no_cut", "no cut in the step's code removes it"
    PASS_THROUGH = "pass_through", ("every cut that removes it also cuts a stepped tensor off "
                                    "the loss")
    UNSTEPPED = "unstepped", "pass-through, and stepped by no optimizer given"


class DeadKind(_Described):
    """What keeps a :class:`~toolkit.audit.DeadParameter`'s gradient away, as one word."""

    BLOCK = "block", "a toolkit stop_gradient"
    DETACH = "detach", ".detach() or .data"
    COPY = "copy", "copy.deepcopy of the model: the copy is new leaves"
    ZERO_DERIVATIVE = "zero_derivative", ("reached only through torch.sign, round and the like, "
                                          "whose gradient is exactly zero")
    CANCELLED = "cancelled", "gradients that arrive by two paths cancel exactly"
    NO_GRAD = "no_grad", "computed under torch.no_grad()"
    LIBRARY_ARGUMENT = "library_argument", ("read inside a library call that trains only what "
                                            "one of its arguments names, left out")
    CHECKPOINT = "checkpoint", ("a reentrant torch.utils.checkpoint whose inputs do not "
                                "require grad")
    VALUE_COPY = "value_copy", "torch.tensor(...) of a tensor computed from it"
    FROZEN = "frozen", "requires_grad=False"
    INTEGER_RESULT = "integer_result", ("its values reach the step only as an integer or "
                                        "boolean result")
    FIRST_ORDER = "first_order", ("reached only through torch.autograd.grad without "
                                  "create_graph=True")
    NOT_USED = "not_used", "never read"
    WRITTEN = "written", "written in place by the step from other tensors"
    REPLACED = "replaced", "held by a module replaced after the optimizer was built"
    NO_GRAPH = "no_graph", "read, but what it computes never reaches the loss"


class HeldKind(_Described):
    """What holds a :class:`~toolkit.audit.HeldGraph`'s graph."""

    BUFFER = "buffer", "a module's buffer"
    ATTRIBUTE = "attribute", "a module's tensor attribute"
    PARAMETER = "parameter", ("a parameter that does not require grad, written in place from "
                              "one that does")
    KEPT = "kept", ("a place outside modules: a list, dict, global, closure variable or plain "
                    "object (its ``kept_in`` says which)")


class UnrollKind(_Described):
    """What shows that an :class:`~toolkit.audit.UnrolledLoop`'s earlier passes were meant to
    be cut."""

    SPLIT = "split", ("the loop's pass is written again right after it (once more, or as a "
                      "loop of the same body): a one-step or truncated gradient")
    SAMPLED = "sampled", ("an estimate the loss compares with a target at each pass is read, "
                          "uncut, as the positions where the next pass samples its input: a "
                          "refinement whose passes are each trained by their own comparison")


E = TypeVar("E", bound=enum.StrEnum)


def coerce(kinds: type[E], value: object, field: str,
           allowed: Iterable[E] | None = None) -> E:
    """``value`` as a member of ``kinds`` (a member, or a string equal to one); a value that
    names none, or one outside ``allowed``, is a :class:`ValueError` naming ``field``
    (``"Leak.kind"``), the value and the values allowed."""
    members = list(kinds) if allowed is None else sorted(allowed)
    try:
        member = value if isinstance(value, kinds) else kinds(value)
    except ValueError:
        member = None
    if member is None or member not in members:
        raise ValueError(f"{field}: {value!r} is not a {kinds.__name__}; expected one of "
                         f"{', '.join(repr(m.value) for m in members)}")
    return member  # type: ignore[return-value]
