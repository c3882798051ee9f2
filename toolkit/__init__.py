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

import os
from typing import TYPE_CHECKING

from toolkit._utils.lazy import imported_names, lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it: the names toolkit.core imports (read from its source,
# so that torch is not imported yet), but for is_compiling, which stays in toolkit.core
_EXPORTS: dict[str, str] = {
    name: module for name, module in imported_names(
        os.path.join(os.path.dirname(__file__), "core", "__init__.py"), "toolkit.core").items()
    if name != "is_compiling"}
__all__ = sorted(["__version__", *_EXPORTS])

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and IDEs
    from toolkit.core import *  # noqa: F403

__getattr__, __dir__ = lazy_exports("toolkit", globals(), _EXPORTS)

# Old module paths (``toolkit.divergence``, ...) still import, with a DeprecationWarning, for one
# release.
from toolkit._utils import moved as _moved  # noqa: E402

_moved.install()
