"""The primitive and the gradient tools everything else builds on."""

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
    is_compiling,
    record_blocks,
    require_block,
    reset_seen_blocks,
    seen_blocks,
    stop_gradient,
)

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
    "is_compiling",
    "record_blocks",
    "require_block",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
    "trace_cuts",
]
