"""The stop_gradient toolkit: where a gradient must be cut, and what happens when it is not.

The public API, by layer:

- :mod:`toolkit.core` — the switchable, named primitive: :func:`stop_gradient`,
  :func:`disable_blocks`, :func:`seen_blocks` (+ :func:`record_blocks`,
  :func:`reset_seen_blocks`, :func:`is_block_disabled`), :func:`as_constant` and
  :func:`require_block` (how algorithms make their one cut), and :func:`observe_cuts` (the
  hook through which the lens sees every cut);
- :mod:`toolkit.lens` — the backward graph read without ``backward()``: gradient tools
  (:func:`compare_gradients`, :func:`has_gradient_path`, :func:`assert_blocked`,
  :func:`count_graph_nodes`), paths and flow (:func:`gradient_path`, :func:`assert_no_gradient`,
  :func:`gradient_flow`), graphs (:func:`trace_cuts`, :func:`gradient_graph`,
  :func:`draw_gradient_graph`);
- :mod:`toolkit.audit` — one audit of a training step, by stage (record, truth, rules, fixes,
  verify), behind :func:`audit_step`, :func:`assert_clean_step`, the callbacks, the pytest
  fixture and ``toolkit audit SCRIPT``; DDP's unused parameters explained
  (:func:`explain_unused_parameters`);
- :mod:`toolkit.algorithms` — reference implementations of the places where the block matters;
- :mod:`toolkit.lab` — experiments, runs, verdicts, reports, the command line, datasets and
  measurements;
- :mod:`toolkit.integrations` — the audit where people train: a Lightning callback and a
  Hugging Face ``Trainer`` callback (optional extras, imported only on use).

The names below are loaded on first use (PEP 562), so ``import toolkit`` itself is instant and
the command line can answer ``--help`` without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit._utils.lazy import lazy_exports

__version__ = "0.1.0"

#: The primitive, from :mod:`toolkit.core`.
_CORE = (
    "BlockNotSwitchableError",
    "as_constant",
    "disable_blocks",
    "is_block_disabled",
    "observe_cuts",
    "record_blocks",
    "require_block",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
)
#: The lens, from :mod:`toolkit.lens`.
_LENS = (
    "CutTrace",
    "GradientComparison",
    "GradientFlow",
    "GradientGraph",
    "GradientLeakError",
    "ParameterComparison",
    "assert_blocked",
    "assert_no_gradient",
    "compare_gradients",
    "count_graph_nodes",
    "draw_gradient_graph",
    "gradient_flow",
    "gradient_graph",
    "gradient_path",
    "has_gradient_path",
    "trace_cuts",
)
#: The audit of a training step, from :mod:`toolkit.audit`.
_AUDIT = (
    "CarriedGraph",
    "ConstantTerm",
    "CutKeys",
    "DeadParameter",
    "FrozenTensor",
    "HeldGraph",
    "Leak",
    "SharedTensor",
    "StepAudit",
    "TrainedTarget",
    "UnrolledLoop",
    "UnusedParameter",
    "UnusedParameters",
    "assert_clean_step",
    "audit_step",
    "explain_unused_parameters",
)
__all__ = ["__version__", *_CORE, *_LENS, *_AUDIT]

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and IDEs
    from toolkit.audit import *  # noqa: F403
    from toolkit.core import *  # noqa: F403
    from toolkit.lens import *  # noqa: F403

__getattr__, __dir__ = lazy_exports(
    "toolkit", globals(), {**dict.fromkeys(_CORE, "toolkit.core"),
                           **dict.fromkeys(_LENS, "toolkit.lens"),
                           **dict.fromkeys(_AUDIT, "toolkit.audit")})
