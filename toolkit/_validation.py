"""Argument checks and conversions shared by every public entry point.

Valid arguments are declared once, as in scikit-learn's ``_parameter_constraints``, and checked
by one mechanism::

    CONSTRAINTS = {"n_components": [Integer(1)], "tol": [Real(0)], "init": [Options("a", "b")]}
    check_params("GaussianMixture", {"n_components": 3, "tol": 1e-3, "init": "a"}, CONSTRAINTS)

A value must satisfy one constraint of its list. The error says where, which argument, what was
expected and what came; a value of the wrong kind raises ``TypeError``, a value of the right kind
outside the allowed range or set raises ``ValueError``.

The module also holds the one device resolution (:func:`resolve_device`), the one conversion of
arrays to tensors (:func:`as_tensor`) and of seeds to generators (:func:`resolve_generator`), and
what the scikit-learn estimators share: their data check (:func:`check_X`), dtype rule
(:func:`resolve_dtype`), random states (:func:`numpy_random_state`) and "type in, type out"
(:func:`to_output`).
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

__all__ = [
    "Bool",
    "Callable_",
    "Constraint",
    "Generator",
    "Instance",
    "Integer",
    "NoneValue",
    "Options",
    "Real",
    "as_tensor",
    "check",
    "check_X",
    "check_callable",
    "check_dtype",
    "check_params",
    "is_int",
    "numpy_random_state",
    "resolve_device",
    "resolve_dtype",
    "resolve_generator",
    "to_output",
]


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


def _show(value: object) -> str:
    text = repr(value)
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
    raise error(f"{where}: {arg} must be {expected}, got {_show(value)}")


def check_params(where: str, values: Mapping[str, Any],
                 constraints: Mapping[str, Iterable[Constraint | None]]) -> None:
    """Check every ``values[name]`` against ``constraints[name]`` (names without one pass)."""
    for name, allowed in constraints.items():
        if name in values:
            check(where, name, values[name], allowed)


# ---------------------------------------------------------------------------------------------
# devices, tensors, generators


def resolve_device(device: torch.device | str | None, *, where: str = "device"
                   ) -> torch.device:
    """The one meaning of a ``device`` argument across the toolkit.

    ``None`` and ``"auto"``: CUDA when available, else CPU. Anything else is passed to
    ``torch.device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``); asking for CUDA
    on a machine without it is an error that says so.
    """
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{where}: device must be None, 'auto', a string such as 'cpu' or "
                        f"'cuda', or a torch.device, got {_show(device)}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"{where}: device {device!r} is not a valid device (use 'cpu', "
                         f"'cuda', 'cuda:0' or 'auto')") from err
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{where}: device {device!r} asks for CUDA, but torch reports no "
                             f"CUDA device on this machine; use device='cpu' or 'auto'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"{where}: device {device!r} asks for CUDA device {dev.index}, but "
                             f"only {torch.cuda.device_count()} exist; use 'cuda:0' or 'auto'")
    return dev


def check_dtype(where: str, dtype: Any, *, arg: str = "dtype") -> torch.dtype:
    """A floating-point ``torch.dtype``."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{where}: {arg} must be a floating torch.dtype such as torch.float32, "
                        f"got {_show(dtype)}")
    if not dtype.is_floating_point:
        raise ValueError(f"{where}: {arg} must be a floating torch.dtype such as torch.float32, "
                         f"got {dtype}")
    return dtype


_REAL_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def as_tensor(x: Any, *, where: str, arg: str = "X", dtype: torch.dtype | None = None,
              device: torch.device | str | None = None, ndim: int | None = None,
              finite: bool = False, min_rows: int = 0) -> torch.Tensor:
    """Convert a tensor, numpy array, pandas frame or nested list to a real-valued tensor.

    Tensors keep their device unless ``device`` is given; other inputs go to ``device`` (CPU by
    default). ``dtype``: the result's dtype; without it floating tensors keep theirs and integer
    or boolean input becomes float64 (numpy's default float). ``ndim`` requires that many
    dimensions; ``finite`` rejects NaN and infinity; ``min_rows`` requires that many rows.
    """
    if isinstance(x, torch.Tensor):
        t = x
    else:
        try:
            t = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{where}: {arg} must be an array-like of numbers or a tensor, "
                            f"got {type(x).__name__}") from err
    if not (t.is_floating_point() or t.dtype in _REAL_DTYPES):
        raise TypeError(f"{where}: {arg} must hold real numbers, got dtype {t.dtype}")
    target = dtype if dtype is not None else (t.dtype if t.is_floating_point() else torch.float64)
    t = t.to(device=t.device if device is None else device, dtype=target)
    if ndim is not None and t.ndim != ndim:
        hint = "; reshape a single feature with X.reshape(-1, 1)" if ndim == 2 and t.ndim == 1 \
            else ""
        raise ValueError(f"{where}: {arg} must be {ndim}-D, got shape {tuple(t.shape)}{hint}")
    if min_rows and (t.ndim == 0 or t.shape[0] < min_rows):
        raise ValueError(f"{where}: {arg} must have at least {min_rows} row(s), got shape "
                         f"{tuple(t.shape)}")
    if finite and t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{where}: {arg} contains NaN or infinity; remove or impute those "
                         f"values")
    return t


def resolve_generator(random_state: Any, *, where: str,
                      device: torch.device | str | None = None) -> torch.Generator:
    """A ``torch.Generator`` from ``None`` (fresh random seed), an int seed, a numpy
    ``RandomState``/``Generator`` (a seed drawn from it) or a ``torch.Generator`` (used as is)."""
    if isinstance(random_state, torch.Generator):
        return random_state
    g = torch.Generator(device=device if device is not None else "cpu")
    if random_state is None:
        g.seed()
    elif is_int(random_state):
        if random_state < 0:
            raise ValueError(f"{where}: random_state must be a non-negative int seed, got "
                             f"{random_state}")
        g.manual_seed(int(random_state))
    elif isinstance(random_state, np.random.RandomState):
        g.manual_seed(int(random_state.randint(0, 2**31 - 1)))
    elif isinstance(random_state, np.random.Generator):
        g.manual_seed(int(random_state.integers(0, 2**63 - 1)))
    else:
        raise TypeError(f"{where}: random_state must be None, an int, a numpy RandomState or "
                        f"Generator, or a torch.Generator, got {_show(random_state)}")
    return g


def check_callable(where: str, arg: str, fn: Any) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"{where}: {arg} must be callable, got {_show(fn)}")
    return fn


# ---------------------------------------------------------------------------------------------
# what the scikit-learn estimators accept and return

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_dtype(dtype: str | torch.dtype | None, X: Any) -> torch.dtype:
    """The computation's dtype: ``dtype`` if given (``"float32"``, ``"float64"`` or a torch
    dtype), else float32 data stay float32 and everything else becomes float64 (scikit-learn's
    rule for estimators that preserve float32)."""
    if dtype is not None:
        return _DTYPES.get(dtype, dtype)  # type: ignore[arg-type]
    kind = getattr(X, "dtype", None)
    return torch.float32 if kind in (torch.float32, np.float32) else torch.float64


def _as_numeric_array(where: str, arg: str, x: Any) -> np.ndarray:
    """A real numeric numpy array from an array-like (object arrays of numbers are converted)."""
    sparse = sys.modules.get("scipy.sparse")  # not imported: x cannot be a sparse matrix
    if sparse is not None and sparse.issparse(x):
        raise TypeError(f"{where}: {arg} must be dense; sparse input is not supported (got "
                        f"{type(x).__name__}), convert it with {arg}.toarray()")
    try:
        arr = np.asarray(x)
        if arr.dtype == object:
            arr = arr.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where}: {arg} must be an array-like of numbers or a tensor "
                        f"({err})") from err
    if np.iscomplexobj(arr):
        raise ValueError(f"{where}: {arg} must hold real numbers; Complex data not supported "
                         f"(got dtype {arr.dtype})")
    if not arr.flags.writeable:  # torch cannot wrap a read-only buffer (e.g. a memmap)
        arr = arr.copy()
    return arr


def check_X(where: str, X: Any, *, device: torch.device, dtype: torch.dtype,
            n_features: int | None = None, min_samples: int = 1) -> torch.Tensor:
    """(n_samples, n_features) finite data as a tensor in ``dtype`` on ``device``.

    ``X``: a tensor, numpy array, array-like or pandas frame. The messages contain the phrases
    scikit-learn's conformance checks look for; ``where`` is ``"<Estimator>.<method>"``.
    """
    if not isinstance(X, torch.Tensor):
        X = _as_numeric_array(where, "X", X)
    elif X.is_complex():
        raise ValueError(f"{where}: X must hold real numbers; Complex data not supported (got "
                         f"dtype {X.dtype})")
    if X.ndim != 2:
        raise ValueError(f"{where}: X must be 2-D (n_samples, n_features), got shape "
                         f"{tuple(X.shape)}; Reshape your data with X.reshape(-1, 1) if it has "
                         f"a single feature or X.reshape(1, -1) if it is a single sample")
    X = as_tensor(X, where=where, arg="X", dtype=dtype, device=device, finite=True)
    check_X_shape(where, tuple(X.shape), n_features=n_features, min_samples=min_samples)
    return X


def check_X_shape(where: str, shape: tuple[int, int], *, n_features: int | None = None,
                  min_samples: int = 1) -> None:
    """The sample and feature counts of a 2-D ``X`` (dense or sparse), in scikit-learn's words."""
    n, d = shape
    if n < min_samples:
        raise ValueError(f"{where}: X must have at least {min_samples} samples, got "
                         f"n_samples={n} (shape={shape})")
    if d == 0:
        raise ValueError(f"{where}: X must have at least one feature, got 0 feature(s) "
                         f"(shape={shape}) while a minimum of 1 is required.")
    if n_features is not None and d != n_features:
        raise ValueError(f"{where}: X has {d} features, but {where.split('.')[0]} is expecting "
                         f"{n_features} features as input.")


def numpy_random_state(random_state: Any, *, where: str) -> np.random.RandomState:
    """scikit-learn's ``check_random_state`` (None: numpy's global RandomState, an int seed, a
    ``RandomState`` as is), plus a numpy ``Generator`` or a ``torch.Generator``, from which a
    seed is drawn."""
    if random_state is None:
        return np.random.mtrand._rand
    if isinstance(random_state, np.random.RandomState):
        return random_state
    if is_int(random_state):
        if not 0 <= random_state < 2**32:
            raise ValueError(f"{where}: random_state must be an int in [0, 2**32 - 1], got "
                             f"{random_state}")
        return np.random.RandomState(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(int(random_state.integers(0, 2**32)))
    if isinstance(random_state, torch.Generator):
        seed = torch.randint(0, 2**31 - 1, (1,), generator=random_state,
                             device=random_state.device)
        return np.random.RandomState(int(seed.item()))
    raise TypeError(f"{where}: random_state must be None, an int, a numpy RandomState or "
                    f"Generator, or a torch.Generator, got {_show(random_state)}")


def to_output(t: torch.Tensor, like: Any) -> np.ndarray | torch.Tensor:
    """``t`` in the kind of ``like``: a tensor on ``like``'s device, else a numpy array."""
    if isinstance(like, torch.Tensor):
        return t.to(like.device)
    return t.cpu().numpy()
