"""Tables of a report: summary and costs side by side, in words and numbers with units
(:func:`toolkit._utils.formatting.format_value`, the one number formatter of the report, the
command line and the docs: times in s or ms, bytes in KiB/MiB/GiB, four significant digits)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolkit._utils.formatting import format_value
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED, VARIANTS, flatten

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


def quantity_words(path: str) -> str:
    """A dotted summary or costs path as words, its parts separated by commas.

    >>> quantity_words("timers.train_gradient_blocked_and_unblocked")
    'wall time, train gradient blocked and unblocked'
    >>> quantity_words("memory.peak_bytes"), quantity_words("time_ratio_buggy_over_fixed")
    ('peak memory', 'time ratio buggy ÷ fixed')
    """
    words: list[str] = []
    for part in filter(None, path.split(".")):
        said = _WORDS.get(part)
        if said is None:
            said = next((part[:-len(s)] + w for s, w in _SUFFIXES
                         if part.endswith(s) and len(part) > len(s)), part)
            said = said.replace("_over_", " ÷ ").replace("_", " ")
        if words and words[-1] in said.split():  # "memory, peak memory": said once
            words.pop()
        words.append(said)
    return ", ".join(words)


def variant_table(tree: Mapping[str, Any]) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    """``(columns, rows, rest)`` of a summary/costs dict: the values whose path names a variant
    (:func:`split_variant`) side by side with their difference, and the other values, flat."""
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
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (b, u))
        diff = ("0 (equal)" if b == u else format_value(u - b, name)) if numbers else ""
        rows.append([name, format_value(b, name), format_value(u, name), diff])
    return ["quantity", BLOCKED, UNBLOCKED, "unblocked − blocked"], rows, rest


def tables(tree: Mapping[str, Any]) -> list[tuple[list[str], list[list[str]]]]:
    """The side-by-side table and a table of the other values, each ``(columns, rows)``."""
    columns, rows, rest = variant_table(tree)
    return [(columns, rows)] * bool(rows) + [
        (["quantity", "value"], [[k, format_value(v, k)] for k, v in rest.items()])] * bool(rest)
