"""The primitive and the gradient tools everything else builds on."""

from toolkit.core.backward_graph import CutTrace, GradientGraph, gradient_graph, trace_cuts
from toolkit.core.gradients import (
    GradientComparison,
    ParameterComparison,
    assert_blocked,
    compare_gradients,
    count_graph_nodes,
    has_gradient_path,
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
    "CutTrace",
    "GradientComparison",
    "GradientGraph",
    "ParameterComparison",
    "as_constant",
    "assert_blocked",
    "compare_gradients",
    "count_graph_nodes",
    "disable_blocks",
    "gradient_graph",
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
