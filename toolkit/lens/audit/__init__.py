"""The step audit: :func:`audit_step` and :func:`assert_clean_step`, and what they find.

One file per idea: :mod:`~toolkit.lens.audit.step` runs the step and the rules;
:mod:`~toolkit.lens.audit.arguments` checks what it is given; :mod:`~toolkit.lens.audit.record`
records the two calls (names, cuts, writes, call sites) and :mod:`~toolkit.lens.audit.recorded`
reads the second once for every rule; one rule per kind of finding (:mod:`.leaks`,
:mod:`.targets`, :mod:`.dead`, :mod:`.carried`, :mod:`.held`, :mod:`.shared`), listed in
:data:`~toolkit.lens.audit.step.RULES`; the findings' types in :mod:`.findings`, the report in
:mod:`.result`; each fix as edits of the user's code (:class:`Edit`, :func:`apply_edits`) in
:mod:`.edits`.
"""

from toolkit.lens.audit.edits import Edit, apply_edits
from toolkit.lens.audit.findings import (
    CarriedGraph,
    DeadParameter,
    FrozenTensor,
    HeldGraph,
    Leak,
    SharedTensor,
    TrainedTarget,
)
from toolkit.lens.audit.result import StepAudit
from toolkit.lens.audit.step import RULES, assert_clean_step, audit_step

__all__ = ["RULES", "CarriedGraph", "DeadParameter", "Edit", "FrozenTensor", "HeldGraph", "Leak",
           "SharedTensor", "StepAudit", "TrainedTarget", "apply_edits", "assert_clean_step",
           "audit_step"]
