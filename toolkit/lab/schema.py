"""The results format in one place: the two variants every experiment compares, and the grammar
of the metric keys a run logs.

Every experiment runs its algorithm twice from the same random state: with its blocks
(:data:`BLOCKED`, the method as published) and inside ``disable_blocks`` (:data:`UNBLOCKED`).
Results, summaries, metrics, tables and figures name the two by these strings, and by nothing
else: writers, readers and the report import them from here.

A metric key is ``"<variant>/<group>/<name>"`` (``"blocked/train/loss"``), or
``"<group>/<name>"`` for a quantity of neither variant (``"reference/loss"``); :func:`metric_key`
builds one and :func:`split_metric_key` reads one back.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BLOCKED", "UNBLOCKED", "VARIANTS", "metric_key", "split_metric_key"]

#: with the blocks: the method as published
BLOCKED: Final = "blocked"
#: the same code inside ``disable_blocks``: the gradient flows where the blocks cut it
UNBLOCKED: Final = "unblocked"
#: both, in the order every table and figure shows them
VARIANTS: Final = (BLOCKED, UNBLOCKED)


def metric_key(*parts: str) -> str:
    """``"blocked/train/loss"`` from ``(BLOCKED, "train", "loss")``; every part non-empty and
    free of ``/``.

    >>> metric_key(BLOCKED, "chain_grad", "norm")
    'blocked/chain_grad/norm'
    """
    if not parts or any(not p or "/" in p for p in parts):
        raise ValueError(f"metric_key: parts must be non-empty and without '/', got {parts!r}")
    return "/".join(parts)


def split_metric_key(key: str) -> tuple[str | None, str]:
    """``(variant, rest)`` of a metric key: the variant when the key starts with one, else
    ``None`` and the whole key.

    >>> split_metric_key("unblocked/train/loss"), split_metric_key("reference/loss")
    (('unblocked', 'train/loss'), (None, 'reference/loss'))
    """
    head, _, rest = key.partition("/")
    return (head, rest) if head in VARIANTS and rest else (None, key)
