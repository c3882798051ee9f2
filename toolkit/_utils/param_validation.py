"""Declarative argument checks shared by every public entry point.

Valid arguments are declared once, as in scikit-learn's ``_parameter_constraints``, and checked
by one mechanism::

    CONSTRAINTS = {"n_components": [Integer(1)], "tol": [Real(0)], "init": [Options("a", "b")]}
    check_params("GaussianMixture", {"n_components": 3, "tol": 1e-3, "init": "a"}, CONSTRAINTS)

A value must satisfy one constraint of its list. The error says where, which argument, what was
expected and what came; a value of the wrong kind raises ``TypeError``, a value of the right kind
outside the allowed range or set raises ``ValueError``. Arrays, devices, dtypes and random
states are converted by :mod:`toolkit._utils.array_validation` (scikit-learn likewise keeps
``utils/_param_validation.py`` apart from ``utils/validation.py``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

__all__ = ["Bool", "Callable_", "Constraint", "Generator", "Instance", "Integer", "NoneValue",
           "Options", "Real", "check", "check_params", "is_int", "show_value"]


def is_int(value: object) -> bool:
    """An integer (Python or numpy), and not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Constraint:
    """One acceptable kind of value; subclasses say which."""

    def kind_matches(self, value: object) -> bool:
        """Whether ``value`` is of this constraint's kind (type), in or out of range."""
        raise NotImplementedError

    def holds(self, value: object) -> bool:
        """Whether ``value`` satisfies the constraint."""
        return self.kind_matches(value)

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Integer(Constraint):
    """An int (numpy ints too, never a bool) in ``[low, high]`` (``None``: unbounded)."""

    low: int | None = None
    high: int | None = None

    def kind_matches(self, value: object) -> bool:
        return is_int(value)

    def holds(self, value: object) -> bool:
        return is_int(value) and (self.low is None or value >= self.low) and (
            self.high is None or value <= self.high)

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"an int in [{self.low}, {self.high}]"
        if self.low is not None:
            return f"an int >= {self.low}"
        if self.high is not None:
            return f"an int <= {self.high}"
        return "an int"


@dataclass(frozen=True)
class Real(Constraint):
    """A finite real number (ints accepted, bools not) in an interval.

    ``closed``: which ends belong to the interval, ``"both"``, ``"left"``, ``"right"`` or
    ``"neither"``; an end that is ``None`` is unbounded.
    """

    low: float | None = None
    high: float | None = None
    closed: Literal["both", "left", "right", "neither"] = "both"

    def kind_matches(self, value: object) -> bool:
        return _is_real(value)

    def holds(self, value: object) -> bool:
        if not _is_real(value) or not math.isfinite(value):  # type: ignore[arg-type]
            return False
        v = float(value)  # type: ignore[arg-type]
        if self.low is not None:
            if v < self.low or (v == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if v > self.high or (v == self.high and self.closed in ("left", "neither")):
                return False
        return True

    def describe(self) -> str:
        lo_in = self.closed in ("both", "left")
        hi_in = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            return (f"a number in {'[' if lo_in else '('}{self.low:g}, {self.high:g}"
                    f"{']' if hi_in else ')'}")
        if self.low is not None:
            return f"a number {'>=' if lo_in else '>'} {self.low:g}"
        if self.high is not None:
            return f"a number {'<=' if hi_in else '<'} {self.high:g}"
        return "a finite number"


class Options(Constraint):
    """One of a fixed set of values (compared with ``==``; strings are case-sensitive)."""

    def __init__(self, *values: object) -> None:
        self.values = values

    def kind_matches(self, value: object) -> bool:
        # the kind of an option is the kind of the options (a misspelt string is a ValueError)
        return any(type(value) is type(v) for v in self.values)

    def holds(self, value: object) -> bool:
        return any(type(value) is type(v) and value == v for v in self.values)

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)


class _NoneConstraint(Constraint):
    def kind_matches(self, value: object) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"


class _BoolConstraint(Constraint):
    def kind_matches(self, value: object) -> bool:
        return isinstance(value, (bool, np.bool_))

    def describe(self) -> str:
        return "a bool"


class Instance(Constraint):
    """An instance of one of the given types."""

    def __init__(self, *types: type, name: str | None = None) -> None:
        self.types = types
        self.name = name

    def kind_matches(self, value: object) -> bool:
        return isinstance(value, self.types)

    def describe(self) -> str:
        return self.name or " or ".join(f"a {t.__name__}" for t in self.types)


class _CallableConstraint(Constraint):
    def kind_matches(self, value: object) -> bool:
        return callable(value)

    def describe(self) -> str:
        return "a callable"


#: ``None`` as an accepted value (write ``[None, Integer(1)]``; ``None`` itself works too).
NoneValue = _NoneConstraint()
#: A bool (numpy bools too).
Bool = _BoolConstraint()
#: Any callable.
Callable_ = _CallableConstraint()
#: A ``torch.Generator``.
Generator = Instance(torch.Generator, name="a torch.Generator")


def _as_constraint(c: Constraint | None) -> Constraint:
    return NoneValue if c is None else c


def show_value(value: object) -> str:
    """``value`` as an error message shows it: short, on one line, with its type unless it is a
    scalar (an array or tensor by its shape and dtype, not its values)."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(value, numbers.Number):
        return f"{type(value).__name__} of shape {tuple(shape)} and dtype {dtype}"
    text = " ".join(repr(value).split())
    if len(text) > 80:
        text = text[:77] + "..."
    return text if isinstance(value, (str, numbers.Number, type(None))) else (
        f"{type(value).__name__} {text}")


def check(where: str, arg: str, value: Any, constraints: Iterable[Constraint | None]) -> Any:
    """Return ``value`` if it satisfies one of ``constraints``, else raise.

    ``TypeError`` when ``value`` is of none of the accepted kinds, ``ValueError`` when it is of
    an accepted kind but out of range (or not among the options).

    >>> check("f", "n", 3, [Integer(1)])
    3
    >>> check("f", "n", 0, [Integer(1)])
    Traceback (most recent call last):
    ...
    ValueError: f: n must be an int >= 1, got 0
    """
    cs = [_as_constraint(c) for c in constraints]
    if any(c.holds(value) for c in cs):
        return value
    expected = " or ".join(c.describe() for c in cs)
    error = ValueError if any(c.kind_matches(value) for c in cs) else TypeError
    raise error(f"{where}: {arg} must be {expected}, got {show_value(value)}")


def check_params(where: str, values: Mapping[str, Any],
                 constraints: Mapping[str, Iterable[Constraint | None]]) -> None:
    """Check every ``values[name]`` against ``constraints[name]`` (names without one pass)."""
    for name, allowed in constraints.items():
        if name in values:
            check(where, name, values[name], allowed)
