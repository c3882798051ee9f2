"""The stop_gradient toolkit: where a gradient must be cut, and what happens when it is not.

The public API:

- :func:`stop_gradient`, :func:`disable_blocks`, :func:`seen_blocks` (+ :func:`record_blocks`,
  :func:`reset_seen_blocks`, :func:`is_block_disabled`): the switchable, named primitive;
- :func:`as_constant` (evaluate a quantity behind a named block) and :func:`require_block`
  (code that cannot run without its block): how algorithms make their cut;
- :func:`compare_gradients`, :func:`has_gradient_path`, :func:`assert_blocked`,
  :func:`count_graph_nodes`: gradient tools;
- ``toolkit.algorithms``: reference implementations of the places where the block matters;
- ``toolkit.data``: bundled and generated datasets; ``toolkit.measure``: timers, memory probes
  and benchmark rounds; ``toolkit.runner`` / ``toolkit.report``: experiments, results and
  reports.

Importing the package imports torch and nothing heavier (no ``torch._dynamo``, no matplotlib).
"""

from toolkit.core import (
    BlockNotSwitchableError,
    GradientComparison,
    ParameterComparison,
    as_constant,
    assert_blocked,
    compare_gradients,
    count_graph_nodes,
    disable_blocks,
    has_gradient_path,
    is_block_disabled,
    record_blocks,
    require_block,
    reset_seen_blocks,
    seen_blocks,
    stop_gradient,
)

__version__ = "0.1.0"

__all__ = [
    "BlockNotSwitchableError",
    "GradientComparison",
    "ParameterComparison",
    "__version__",
    "as_constant",
    "assert_blocked",
    "compare_gradients",
    "count_graph_nodes",
    "disable_blocks",
    "has_gradient_path",
    "is_block_disabled",
    "record_blocks",
    "require_block",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
]
