"""The lens: what the backward graph of a step does, read without running ``backward()``.

- gradient tools: :func:`compare_gradients`, :func:`has_gradient_path`, :func:`assert_blocked`,
  :func:`count_graph_nodes`;
- paths and flow: :func:`gradient_path`, :func:`assert_no_gradient`, :func:`gradient_flow`;
- the graph and its cuts: :func:`trace_cuts`, :func:`gradient_graph`,
  :func:`draw_gradient_graph` (graphviz ``dot`` where installed, else a layered layout).

Everything here reads graphs that :mod:`toolkit.core`'s cuts shaped; nothing here imports the
audit (:mod:`toolkit.audit`, which reads graphs through it) or the lab (runner, reports,
command line).
"""

from toolkit.lens.backward_graph import CutTrace, GradientGraph, gradient_graph, trace_cuts
from toolkit.lens.flow import (
    GradientFlow,
    GradientLeakError,
    assert_no_gradient,
    gradient_flow,
    gradient_path,
)
from toolkit.lens.gradients import (
    GradientComparison,
    ParameterComparison,
    assert_blocked,
    compare_gradients,
    count_graph_nodes,
    has_gradient_path,
)
from toolkit.lens.graph_draw import draw_gradient_graph

__all__ = [
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
]
