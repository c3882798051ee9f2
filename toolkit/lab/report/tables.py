"""Tables of a report: summary and costs side by side, numbers with 3–4 digits and units.

A value's unit is read from its key: times (``seconds``, ``*_s``, ``timers.*``, ``time``) are
shown in s or ms, byte counts (``*bytes*``) in KiB/MiB/GiB, everything else with four significant
digits; booleans read ``yes``/``no`` (:func:`toolkit._utils.formatting.format_value`, the one
number formatter of the report, the command line and the docs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolkit._utils.formatting import format_value, unit_of
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS, flatten

__all__ = ["VARIANTS", "format_value", "quantity_words", "split_variant", "tables", "unit_of",
           "variant_table"]


def split_variant(path: str) -> tuple[str | None, str]:
    """``(variant, quantity)`` of a dotted summary path, the variant being ``blocked`` or
    ``unblocked`` at any depth, or a last part ending in ``_blocked``/``_unblocked``;
    ``(None, path)`` for anything else.

    >>> split_variant("blocked.final_loss"), split_variant("a_split.unblocked.values.B")
    (('blocked', 'final_loss'), ('unblocked', 'a_split.values.B'))
    >>> split_variant("gradients.l2.norm_unblocked"), split_variant("blocked_vs_unblocked.x")
    (('unblocked', 'gradients.l2.norm'), (None, 'blocked_vs_unblocked.x'))
    """
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part in VARIANTS:
            return part, ".".join(parts[:i] + parts[i + 1:]) or "value"
    for variant in (UNBLOCKED, BLOCKED):  # "unblocked" first: it ends in "blocked"
        stem = parts[-1].removesuffix(f"_{variant}")
        # "x_blocked_and_unblocked", "ratio_unblocked_over_blocked": both variants, not one
        if stem != parts[-1] and stem and BLOCKED not in stem:
            return variant, ".".join([*parts[:-1], stem])
    return None, path


#: Names of a summary's or costs' parts, as a reader says them.
_WORDS = {
    "timers": "wall time", "cpu_seconds": "CPU time", "seconds": "time",
    "seconds_per_epoch": "time per epoch", "step_seconds": "time per step",
    "time_median_s": "median time", "peak_bytes": "peak memory",
    "saved_tensor_bytes": "bytes saved for backward",
    "saved_tensor_peak_bytes": "peak of the bytes saved for backward",
    "graph_nodes": "autograd nodes", "n_iter": "iterations", "rounds": "interleaved rounds",
}
_SUFFIXES = (("_seconds", " time"), ("_s", " time"), ("_bytes", " bytes"))


def _part_words(part: str) -> str:
    if part in _WORDS:
        return _WORDS[part]
    for suffix, words in _SUFFIXES:
        if part.endswith(suffix) and len(part) > len(suffix):
            part = part[: -len(suffix)] + words
            break
    return part.replace("_over_", " ÷ ").replace("_", " ")


def quantity_words(path: str) -> str:
    """A dotted summary or costs path as words: its parts' names spelled out, separated by
    commas (the table keeps the path itself where a reader can find it in the files).

    >>> quantity_words("timers.train_gradient_blocked_and_unblocked")
    'wall time, train gradient blocked and unblocked'
    >>> quantity_words("memory.peak_bytes"), quantity_words("time_ratio_buggy_over_fixed")
    ('peak memory', 'time ratio buggy ÷ fixed')
    """
    words: list[str] = []
    for part in path.split("."):
        if not part:
            continue
        said = _part_words(part)
        if words and words[-1] in said.split():  # "memory, peak memory": said once
            words.pop()
        words.append(said)
    return ", ".join(words)


def variant_table(tree: Mapping[str, Any]) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    """Split a summary/costs dict into a side-by-side table and the rest.

    Returns ``(columns, rows, rest)``: columns are ``["quantity", "blocked", "unblocked",
    "unblocked − blocked"]`` for the values whose path names a variant (:func:`split_variant`:
    ``blocked.x``, ``part.unblocked.x``, ``x_blocked``); ``rest`` holds the other values,
    flattened.
    """
    pairs: dict[str, dict[str, Any]] = {}
    rest: dict[str, Any] = {}
    for path, value in flatten(tree, keep_empty=True).items():
        variant, quantity = split_variant(path)
        if variant is None:
            rest[path] = value
        else:
            pairs.setdefault(quantity, {})[variant] = value
    rows = []
    for name, values in pairs.items():
        b, u = values.get(BLOCKED), values.get(UNBLOCKED)
        diff = ""
        if (isinstance(b, (int, float)) and isinstance(u, (int, float))
                and not isinstance(b, bool) and not isinstance(u, bool)):
            diff = "0 (equal)" if b == u else format_value(u - b, name)
        rows.append([name, format_value(b, name), format_value(u, name), diff])
    return ["quantity", BLOCKED, UNBLOCKED, "unblocked − blocked"], rows, rest


def tables(tree: Mapping[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """The side-by-side table and a table of the other values, each ``(columns, rows)``."""
    columns, rows, rest = variant_table(tree)
    out = []
    if rows:
        out.append((columns, rows))
    if rest:
        out.append((["quantity", "value"], [[k, format_value(v, k)] for k, v in rest.items()]))
    return out
