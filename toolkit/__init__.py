"""The stop_gradient toolkit: where a gradient must be cut, and what happens when it is not.

The public API:

- :func:`stop_gradient`, :func:`disable_blocks`, :func:`seen_blocks` (+ :func:`record_blocks`,
  :func:`reset_seen_blocks`, :func:`is_block_disabled`): the switchable, named primitive;
- :func:`compare_gradients`, :func:`has_gradient_path`, :func:`assert_blocked`: gradient tools;
- ``toolkit.algorithms``: reference implementations of the places where the block matters;
- ``toolkit.data``: bundled and generated datasets; ``toolkit.runner`` / ``toolkit.report``:
  experiments, results and reports.
"""

from toolkit.core import (
    GradientComparison,
    ParameterComparison,
    assert_blocked,
    compare_gradients,
    count_graph_nodes,
    disable_blocks,
    has_gradient_path,
    is_block_disabled,
    record_blocks,
    reset_seen_blocks,
    seen_blocks,
    stop_gradient,
)

__version__ = "0.1.0"

__all__ = [
    "GradientComparison",
    "ParameterComparison",
    "__version__",
    "assert_blocked",
    "compare_gradients",
    "count_graph_nodes",
    "disable_blocks",
    "has_gradient_path",
    "is_block_disabled",
    "record_blocks",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
]
