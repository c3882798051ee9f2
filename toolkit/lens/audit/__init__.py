"""The step audit: :func:`audit_step` and :func:`assert_clean_step`, and what they find.

By stage: :mod:`~toolkit.lens.audit.step` checks what it is given
(:mod:`~toolkit.lens.audit.arguments`), runs the step and the rules;

- :mod:`toolkit.lens.audit.record`: the step run twice and recorded (names, cuts, writes, call
  sites), and, apart, the module and optimizer state saved before and put back after;
- :mod:`toolkit.lens.audit.rules`: the recorded step read once, then one rule per kind of
  finding (leaks, targets, dead, carried, held, kept, shared), listed in
  :data:`~toolkit.lens.audit.step.RULES`, each returning typed findings
  (:mod:`~toolkit.lens.audit.findings`);
- :mod:`toolkit.lens.audit.fixes`: where a fix goes in the user's code, the fix as edits
  (:class:`Edit`, :func:`apply_edits`), and its proof.

The report is :class:`StepAudit` (:mod:`~toolkit.lens.audit.result`).
"""

from toolkit.lens.audit.findings import (
    CarriedGraph,
    DeadParameter,
    FrozenTensor,
    HeldGraph,
    Leak,
    SharedTensor,
    TrainedTarget,
)
from toolkit.lens.audit.fixes.edits import Edit, apply_edits
from toolkit.lens.audit.result import StepAudit
from toolkit.lens.audit.step import RULES, assert_clean_step, audit_step

__all__ = ["RULES", "CarriedGraph", "DeadParameter", "Edit", "FrozenTensor", "HeldGraph", "Leak",
           "SharedTensor", "StepAudit", "TrainedTarget", "apply_edits", "assert_clean_step",
           "audit_step"]
