"""The primitive and the gradient tools everything else builds on.

The imports below are the public API, written once: ``__all__`` here and the lazy namespace of
``toolkit`` (every name but :func:`is_compiling`) are read from them.
"""

# ruff: noqa: F401
# (ruff cannot see that ``__all__`` lists the imports; type checkers read them as re-exports)

import typing

from toolkit import _lazy
from toolkit.core.audit import (
    CarriedGraph,
    DeadParameter,
    FrozenTensor,
    HeldGraph,
    Leak,
    StepAudit,
    TrainedTarget,
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

if not typing.TYPE_CHECKING:  # type checkers, which cannot run this, read the imports themselves
    __all__ = sorted(_lazy.imported_names(__file__, "toolkit.core"))
