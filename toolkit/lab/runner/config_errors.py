"""One-line error messages for config mistakes: which input a key came from, and the fix.

Used by :mod:`toolkit.lab.runner.config`: a pydantic validation error becomes a
:class:`~toolkit.lab.runner.errors.ConfigError` naming the file (or ``--set``), the key path, the
problem and how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from toolkit.lab.runner.errors import ConfigError, suggest

__all__ = ["Sources", "pydantic_error"]


class Sources:
    """Which input (file, ``--set``, ``[sweep]``) a key path came from, for error messages."""

    def __init__(self, path: str, overrides: Sequence[tuple[str, str]]) -> None:
        self.path = path
        self.overrides = list(overrides)  # (dotted key, original text)
        self.sweep: set[str] = set()

    def __call__(self, key: str) -> str:
        for okey, text in reversed(self.overrides):
            if key == okey or key.startswith(okey + ".") or okey.startswith(key + "."):
                return f"--set {text}"
        for skey in self.sweep:
            if key == skey or key.startswith(skey + "."):
                return f"{self.path} [sweep]"
        return self.path


_FIXES = {
    "greater_than": "use a value > {gt}",
    "greater_than_equal": "use a value >= {ge}",
    "less_than": "use a value < {lt}",
    "less_than_equal": "use a value <= {le}",
    "int_parsing": "use an integer such as 10",
    "int_type": "use an integer such as 10",
    "int_from_float": "use an integer such as 10 (no fractional part)",
    "float_parsing": "use a number such as 0.5",
    "float_type": "use a number such as 0.5",
    "bool_parsing": "use true or false",
    "bool_type": "use true or false",
    "string_type": 'use a quoted string such as "text"',
    "list_type": "use a list such as [1, 2]",
    "tuple_type": "use a list such as [1, 2]",
    "dict_type": "use a table",
    "literal_error": "use one of {expected}",
    "enum": "use one of {expected}",
    "missing": "add this key",
    "too_short": "give at least {min_length} item(s)",
    "too_long": "give at most {max_length} item(s)",
    "string_too_short": "give at least {min_length} character(s)",
    "string_pattern_mismatch": "use a value matching {pattern}",
    "value_error": "",
}


def pydantic_error(err: ValidationError, model: type[BaseModel], *, prefix: str,
                    source_of: Any) -> ConfigError:
    """The first validation error of ``err`` as a one-line ConfigError."""
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    key = ".".join([prefix, *loc] if prefix else loc)
    source = source_of(key)
    if first["type"] == "extra_forbidden":
        fields = _fields_at(model, loc[:-1])
        hint = suggest(loc[-1], fields)
        valid = ", ".join(fields) if fields else "none"
        fix = f"{hint} (valid keys: {valid})" if hint else f"valid keys: {valid}"
        return ConfigError(source, key, "unknown key", fix)
    ctx = dict(first.get("ctx") or {})
    template = _FIXES.get(first["type"], "")
    try:
        fix = template.format(**ctx)
    except (KeyError, IndexError):
        fix = ""
    description = _description(model, loc)
    if description:
        fix = f"{fix} ({loc[-1]}: {description})" if fix else f"{loc[-1]}: {description}"
    problem = first["msg"].removeprefix("Value error, ")
    if first["type"] not in ("missing", "value_error"):
        problem += f", got {first.get('input')!r}"
    return ConfigError(source, key, problem, fix)


def _fields_at(model: type[BaseModel], loc: list[str]) -> list[str]:
    current: Any = model
    for part in loc:
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            return []
        current = info.annotation
    return list(getattr(current, "model_fields", {}))


def _description(model: type[BaseModel], loc: list[str]) -> str:
    info = model.model_fields.get(loc[0]) if loc else None
    return (info.description or "") if info is not None and len(loc) == 1 else ""
