"""The primitive every algorithm builds on: a named, switchable ``stop_gradient``.

- :func:`stop_gradient` — the identity going forward, no gradient backward (any nesting);
- :func:`disable_blocks` — switch named blocks off (fnmatch globs, nestable, context-local);
- :func:`as_constant` — evaluate a quantity behind a named block (no graph while it is active);
- :func:`require_block` — for code that cannot run without its block;
- :func:`seen_blocks`, :func:`record_blocks`, :func:`reset_seen_blocks` — which blocks ran;
- :func:`observe_cuts` — the hook for observers of cuts: see (and mark) every block that runs.

The lens and the audit, which read the graphs these cuts shape (through :func:`observe_cuts`),
live in :mod:`toolkit.lens`.
"""

from toolkit.core.stop_gradient import (
    BlockNotSwitchableError,
    as_constant,
    disable_blocks,
    is_block_disabled,
    is_compiling,
    observe_cuts,
    record_blocks,
    require_block,
    reset_seen_blocks,
    seen_blocks,
    stop_gradient,
)

__all__ = [
    "BlockNotSwitchableError",
    "as_constant",
    "disable_blocks",
    "is_block_disabled",
    "is_compiling",
    "observe_cuts",
    "record_blocks",
    "require_block",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
]
