"""The lens: what the backward graph of a step does, read without running ``backward()``.

- gradient tools: :func:`compare_gradients`, :func:`has_gradient_path`, :func:`assert_blocked`,
  :func:`count_graph_nodes`;
- paths and flow: :func:`gradient_path`, :func:`assert_no_gradient`, :func:`gradient_flow`;
- the graph and its cuts: :func:`trace_cuts`, :func:`gradient_graph`,
  :func:`draw_gradient_graph` (graphviz ``dot`` where installed, else a layered layout);
- the audit of a whole training step: :func:`audit_step`, :func:`assert_clean_step`, and what
  it finds (:class:`StepAudit`: :class:`Leak`, :class:`TrainedTarget`, :class:`DeadParameter`,
  :class:`CarriedGraph`, :class:`HeldGraph`, and the information :class:`FrozenTensor`);
- DDP's unused parameters, explained before DDP reports them: :func:`explain_unused_parameters`
  (:class:`UnusedParameters`, :class:`UnusedParameter`).

Everything here reads graphs that :mod:`toolkit.core`'s cuts shaped; nothing here imports the
lab (runner, reports, command line).
"""

from toolkit.lens.audit import (
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
from toolkit.lens.unused import UnusedParameter, UnusedParameters, explain_unused_parameters

__all__ = [
    "CarriedGraph",
    "CutTrace",
    "DeadParameter",
    "FrozenTensor",
    "GradientComparison",
    "GradientFlow",
    "GradientGraph",
    "GradientLeakError",
    "HeldGraph",
    "Leak",
    "ParameterComparison",
    "StepAudit",
    "TrainedTarget",
    "UnusedParameter",
    "UnusedParameters",
    "assert_blocked",
    "assert_clean_step",
    "assert_no_gradient",
    "audit_step",
    "compare_gradients",
    "count_graph_nodes",
    "draw_gradient_graph",
    "explain_unused_parameters",
    "gradient_flow",
    "gradient_graph",
    "gradient_path",
    "has_gradient_path",
    "trace_cuts",
]
