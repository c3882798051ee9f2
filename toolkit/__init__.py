"""The stop_gradient toolkit: where a gradient must be cut, and what happens when it is not.

The public API:

- :func:`stop_gradient`, :func:`disable_blocks`, :func:`seen_blocks` (+ :func:`record_blocks`,
  :func:`reset_seen_blocks`, :func:`is_block_disabled`): the switchable, named primitive;
- :func:`as_constant` (evaluate a quantity behind a named block) and :func:`require_block`
  (code that cannot run without its block): how algorithms make their cut;
- :func:`compare_gradients`, :func:`has_gradient_path`, :func:`assert_blocked`,
  :func:`count_graph_nodes`: gradient tools;
- the lens on any training step: :func:`gradient_path`, :func:`assert_no_gradient`,
  :func:`gradient_flow`, :func:`trace_cuts` / :func:`gradient_graph` and
  :func:`draw_gradient_graph`;
- ``toolkit.algorithms``: reference implementations of the places where the block matters;
- ``toolkit.data``: bundled and generated datasets; ``toolkit.measure``: timers, memory probes
  and benchmark rounds; ``toolkit.runner`` / ``toolkit.report``: experiments, results and
  reports.

The names are loaded on first use (PEP 562), so ``import toolkit`` itself is instant and the
command line can answer ``--help`` without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["BlockNotSwitchableError", "as_constant", "disable_blocks", "is_block_disabled",
         "record_blocks", "require_block", "reset_seen_blocks", "seen_blocks", "stop_gradient"],
        "toolkit.core.stop_gradient"),
    **dict.fromkeys(
        ["GradientComparison", "ParameterComparison", "assert_blocked", "compare_gradients",
         "count_graph_nodes", "has_gradient_path"],
        "toolkit.core.gradients"),
    **dict.fromkeys(
        ["GradientFlow", "GradientLeakError", "assert_no_gradient", "gradient_flow",
         "gradient_path"],
        "toolkit.core.lens"),
    **dict.fromkeys(["CutTrace", "GradientGraph", "gradient_graph", "trace_cuts"],
                    "toolkit.core.backward_graph"),
    "draw_gradient_graph": "toolkit.core.graph_draw",
    **dict.fromkeys(["CarriedGraph", "DeadParameter", "Leak", "StepAudit", "assert_clean_step",
                     "audit_step"], "toolkit.core.audit"),
}

__all__ = [
    "BlockNotSwitchableError",
    "CarriedGraph",
    "CutTrace",
    "DeadParameter",
    "GradientComparison",
    "GradientFlow",
    "GradientGraph",
    "GradientLeakError",
    "Leak",
    "ParameterComparison",
    "StepAudit",
    "__version__",
    "as_constant",
    "assert_blocked",
    "assert_clean_step",
    "assert_no_gradient",
    "audit_step",
    "compare_gradients",
    "count_graph_nodes",
    "disable_blocks",
    "draw_gradient_graph",
    "gradient_flow",
    "gradient_graph",
    "gradient_path",
    "has_gradient_path",
    "is_block_disabled",
    "record_blocks",
    "require_block",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
    "trace_cuts",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from toolkit.core.audit import (
        CarriedGraph,
        DeadParameter,
        Leak,
        StepAudit,
        assert_clean_step,
        audit_step,
    )
    from toolkit.core.backward_graph import CutTrace, GradientGraph, gradient_graph, trace_cuts
    from toolkit.core.gradients import (
        GradientComparison,
        ParameterComparison,
        assert_blocked,
        compare_gradients,
        count_graph_nodes,
        has_gradient_path,
    )
    from toolkit.core.graph_draw import draw_gradient_graph
    from toolkit.core.lens import (
        GradientFlow,
        GradientLeakError,
        assert_no_gradient,
        gradient_flow,
        gradient_path,
    )
    from toolkit.core.stop_gradient import (
        BlockNotSwitchableError,
        as_constant,
        disable_blocks,
        is_block_disabled,
        record_blocks,
        require_block,
        reset_seen_blocks,
        seen_blocks,
        stop_gradient,
    )


__getattr__, __dir__ = lazy_exports("toolkit", globals(), _EXPORTS)
