"""Reading and writing the TOML subset used by configs (stdlib ``tomllib`` reads; a small writer)."""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

__all__ = ["TOMLDecodeError", "dumps", "flatten", "loads", "parse_literal"]

TOMLDecodeError = tomllib.TOMLDecodeError
loads = tomllib.loads

_BARE_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")
# A value given on the command line that is not a TOML literal but reads as a plain word
# (``cpu``, ``em.*``, ``results/tmp``) is taken as a string, so quoting is rarely needed.
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-*/:+]*$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        items = [_value(v, where) for v in value if v is not None]
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        items = [f"{_key(str(k))} = {_value(v, where)}" for k, v in value.items() if v is not None]
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"toml dumps: cannot write {type(value).__name__} at {where!r}")


def _table(lines: list[str], prefix: str, table: Mapping[str, Any]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, Mapping) and v is not None]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if prefix and (scalars or not tables):
        lines.append("")
        lines.append(f"[{prefix}]")
    for k, v in scalars:
        lines.append(f"{_key(str(k))} = {_value(v, f'{prefix}.{k}' if prefix else k)}")
    for k, v in tables:
        _table(lines, f"{prefix}.{_key(str(k))}" if prefix else _key(str(k)), v)


def dumps(data: Mapping[str, Any], header: str = "") -> str:
    """Write a nested mapping as TOML (``None`` values are left out: TOML has no null)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    _table(lines, "", data)
    return "\n".join(lines).lstrip("\n") + "\n"


def flatten(tree: Any, prefix: str = "", *, keep_empty: bool = False) -> dict[str, Any]:
    """Nested mappings as TOML's dotted keys, one level: ``{"a": {"b": 1}}`` → ``{"a.b": 1}``.

    Every key is put after ``prefix``; anything but a mapping is one leaf, ``{prefix: tree}``.
    Empty tables are left out, or kept as leaves with ``keep_empty`` (a report shows them).

    >>> flatten({"a": {"b": 1, "c": {}}}), flatten({"a": {"c": {}}}, keep_empty=True)
    ({'a.b': 1}, {'a.c': {}})
    """
    if not isinstance(tree, Mapping) or (keep_empty and prefix and not tree):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key), keep_empty=keep_empty))
    return out


def parse_literal(text: str) -> Any:
    """Parse one command-line value as a TOML literal (``5``, ``1e-3``, ``true``, ``[1, 2]``,
    ``"text"``); a plain word that is not a literal (``cpu``, ``em.*``) is taken as a string.

    Raises ``ValueError`` for anything else (e.g. an unterminated list).
    """
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as err:
        if _BARE_WORD.match(text):
            return text
        raise ValueError(f"{text!r} is not a TOML value ({err})") from None
