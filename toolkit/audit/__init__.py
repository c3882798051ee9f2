"""The step audit: :func:`audit_step` and :func:`assert_clean_step`, and what they find.

By stage: :mod:`~toolkit.audit.step` checks what it is given
(:mod:`~toolkit.audit.arguments`), runs the step and the rules;

- :mod:`toolkit.audit.record`: the step run twice and recorded (names, cuts, writes, call
  sites), and, apart, the module and optimizer state saved before and put back after;
- :mod:`toolkit.audit.rules`: the recorded step read once, then one rule per kind of
  finding (leaks, targets, dead, carried, held, kept, shared), listed in
  :data:`~toolkit.audit.step.RULES`, each returning typed findings
  (:mod:`~toolkit.audit.findings`);
- :mod:`toolkit.audit.fixes`: where a fix goes in the user's code, the fix as edits
  (:class:`Edit`, :func:`apply_edits`), and its proof.

The report is :class:`StepAudit` (:mod:`~toolkit.audit.result`). Both audits, this one and
``toolkit audit SCRIPT`` (:mod:`~toolkit.audit.cli`), share one vocabulary
(:mod:`~toolkit.audit.kinds`): each finding's :class:`Kind`, a failure or information, and how
its edits were proved (:class:`Proof`); ``--record`` writes the schema of
:mod:`~toolkit.audit.schema`.
"""

from toolkit.audit.edit import Edit
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
from toolkit.audit.fixes.edits import apply_edits
from toolkit.audit.kinds import Kind, Proof
from toolkit.audit.result import StepAudit
from toolkit.audit.step import RULES, assert_clean_step, audit_step
from toolkit.audit.unused import UnusedParameter, UnusedParameters, explain_unused_parameters

__all__ = ["RULES", "CarriedGraph", "ConstantTerm", "CutKeys", "DeadParameter", "Edit",
           "FrozenTensor",
           "HeldGraph", "Kind", "Leak", "Proof", "SharedTensor", "StepAudit", "TrainedTarget",
           "UnrolledLoop", "UnusedParameter", "UnusedParameters", "apply_edits", "assert_clean_step",
           "audit_step", "explain_unused_parameters"]
