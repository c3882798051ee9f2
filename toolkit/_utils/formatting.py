"""One way to write a number for a reader: the report, the command line, the audit and the docs.

- :func:`fmt` — a number for a sentence: 3–4 significant digits, a unit, no float noise; bytes
  in KiB/MiB/GiB, short times in ms;
- :func:`unit_of` — the unit a results key implies (``peak_bytes`` → bytes, ``timers.fit`` → s);
- :func:`format_value` — a table cell: 4 significant digits in the key's unit, ``yes``/``no``,
  ``—`` for nothing, and lists summarised (each entry in the unit, long lists cut short).

Integers without a unit (seeds, counts, steps) are written whole.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["byte_size", "fmt", "format_value", "round_floats", "shown", "unit_of"]

_TIME = re.compile(r"(^|[._/])(seconds?|time|wall|timers?|[a-z0-9]*_s|ms)($|[._/])")
_BYTES = re.compile(r"bytes")
#: a list longer than this shows its first entries, its last and how many there are
LIST_ITEMS = 6


def fmt(value: numbers.Real | None, unit: str = "", *, digits: int = 3) -> str:
    """A number for a sentence: ``digits`` significant digits (3–4), a unit, no float noise.

    >>> fmt(0.0014461230000506475), fmt(1059636, "B"), fmt(2.0, "s"), fmt(None)
    ('0.00145', '1.01 MiB', '2 s', 'n/a')
    >>> fmt(3.2e-11), fmt(-1.2015e0, digits=4), fmt(1 << 20, "B"), fmt(0.0123, "s")
    ('3.2e-11', '-1.202', '1 MiB', '12.3 ms')
    >>> import numpy as np; fmt(np.float32(0.1234567)), fmt(np.int64(12))
    ('0.123', '12')
    """
    if value is None:
        return "n/a"
    if not isinstance(value, numbers.Integral):  # numpy's and torch's scalars too
        value = float(value)
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if isinstance(value, float) and math.isinf(value):
        return ("∞" if value > 0 else "−∞") + (f" {unit}" if unit else "")
    if unit == "B":  # bytes: binary prefixes, as memory is counted
        for scale, prefix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.{digits}g} {prefix}"
        return f"{int(value)} B"
    if unit == "s" and abs(value) < 1 and value != 0:
        return f"{value * 1e3:.{digits}g} ms"
    text = f"{value:.{digits}g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}" if unit else text


def unit_of(key: str) -> str:
    """``"s"`` for a time, ``"B"`` for a byte count, ``""`` otherwise (from the key's words).

    >>> unit_of("timers.fit"), unit_of("peak_bytes"), unit_of("time_ratio"), unit_of("loss")
    ('s', 'B', '', '')
    >>> unit_of("seconds_per_epoch.blocked"), unit_of("speedup_per_step")
    ('s', '')
    """
    lowered = key.lower()
    if _BYTES.search(lowered):
        return "B"
    words = re.split(r"[._/]", lowered)  # "_" too: "time_ratio" → time, ratio
    # "per" makes a ratio, unless the key starts with a time: seconds per epoch are seconds
    leads_with_time = bool(words) and words[0] in ("seconds", "second", "time", "ms", "wall")
    ratio = bool({"ratio", "speedup", "x"} & set(words)) or ("per" in words
                                                              and not leads_with_time)
    if _TIME.search(lowered) and not ratio:
        return "s"
    return ""


def format_value(value: Any, key: str = "") -> str:
    """A table cell: 4 significant digits, the unit the key implies, ``yes``/``no``, ``—``.

    A list of numbers is written entry by entry in the key's unit; one of more than
    :data:`LIST_ITEMS` entries shows the first three, the last, and the count.

    >>> format_value(0.0014461230000506475), format_value(1059636, "peak_bytes")
    ('0.001446', '1.011 MiB')
    >>> format_value(0.25, "timers.fit"), format_value(True), format_value(None)
    ('250 ms', 'yes', '—')
    >>> format_value([223792, 664112, 1194032], "graph_bytes")
    '[218.5 KiB, 648.5 KiB, 1.139 MiB]'
    >>> format_value([1.031766009675882, 2, 3, 4, 5, 6, 7.25])
    '[1.032, 2, 3, …, 7.25] (7 values)'
    """
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Real):  # numpy's scalars too
        unit = unit_of(key)
        if isinstance(value, numbers.Integral) and not unit:
            return str(int(value))
        return fmt(value, unit, digits=4)
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value):
            cells = [format_value(v, key) for v in value]
            if len(cells) > LIST_ITEMS:
                return f"[{', '.join(cells[:3])}, …, {cells[-1]}] ({len(cells)} values)"
            return "[" + ", ".join(cells) + "]"
        text = json.dumps(round_floats(value), ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "..."
    if isinstance(value, Mapping):
        text = json.dumps(round_floats(value), ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "..."
    return str(value)


def round_floats(value: Any, digits: int = 4) -> Any:
    """``value`` (JSON-like) with every float rounded to ``digits`` significant digits, for
    showing a raw record (integers, such as seeds and counts, stay whole).

    >>> round_floats({"wall_seconds": 1.031766009675882, "seed": 3, "t": [0.12345678]})
    {'wall_seconds': 1.032, 'seed': 3, 't': [0.1235]}
    """
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.{digits}g}")
    if isinstance(value, Mapping):
        return {k: round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    return value


def shown(text: object) -> str:
    """``text`` (a path, a name read from a results folder) safe to print on one line: control
    characters (newlines, escapes, NUL) and invisible format characters (right-to-left
    overrides, zero-width marks) are written as ``\\xNN`` / ``\\uNNNN``, everything else as it is.

    >>> shown("results/a\\nb\\u202eevil")
    'results/a\\\\nb\\\\u202eevil'
    """
    import unicodedata

    out = []
    for ch in str(text):
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            code = ord(ch)
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"))
        else:
            out.append(ch)
    return "".join(out)


def byte_size(n: int) -> str:
    """``n`` bytes in the largest binary unit that keeps a number >= 1 (``"14.6 TiB"``)."""
    value, unit = float(n), "bytes"
    for name in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024:
            break
        value, unit = value / 1024, name
    return f"{value:.3g} {unit}"
