"""An allocation that cannot succeed, answered as Python answers it: ``MemoryError``.

torch reports a failed CPU allocation as a ``RuntimeError`` ("[enforce fail at alloc_cpu.cpp]
… can't allocate memory: you tried to allocate N bytes") and a failed CUDA allocation as
``torch.OutOfMemoryError`` (a ``RuntimeError``); numpy raises a ``MemoryError``. A user catches
``MemoryError`` (as for numpy and scikit-learn), so the public entry points that allocate in
proportion to their arguments translate all three into one ``MemoryError`` that names the
method, the sizes that asked for the memory and how much was asked.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from toolkit._utils.formatting import byte_size

__all__ = ["allocation_errors", "is_allocation_failure", "reports_allocation_failures",
           "sized_by"]

F = TypeVar("F", bound=Callable[..., Any])

_TORCH_CPU = ("can't allocate memory", "Storage size calculation overflowed")
_BYTES = re.compile(r"allocate (\d+) bytes")
_SIZE = re.compile(r"(?:Tried to allocate|Unable to allocate) ([\d.]+ ?[KMGTPE]i?B)")


#: torch's and numpy's words for a size beyond int64 (``torch.empty(10**20)``) or beyond what
#: numpy can address: requests no memory holds
_BEYOND_INT64 = "Overflow when unpacking long"
_NUMPY_TOO_BIG = ("array is too big", "Python int too large to convert to C long")


def is_allocation_failure(err: BaseException) -> bool:
    """Whether ``err`` says that memory could not be allocated (torch CPU or CUDA, numpy), or
    that a size was beyond what torch can even ask for (more than 2**63 - 1 elements)."""
    return (isinstance(err, (MemoryError, torch.OutOfMemoryError))
            or (isinstance(err, RuntimeError) and any(m in str(err) for m in _TORCH_CPU))
            or (isinstance(err, TypeError) and _BEYOND_INT64 in str(err))
            or (isinstance(err, (ValueError, OverflowError))
                and any(m in str(err) for m in _NUMPY_TOO_BIG)))


def _amount(err: BaseException) -> str:
    text = str(err)
    if (match := _BYTES.search(text)) is not None:
        return f" (it asked for {byte_size(int(match.group(1)))})"
    if (match := _SIZE.search(text)) is not None:
        return f" (it asked for {match.group(1)})"
    return ""


@contextlib.contextmanager
def allocation_errors(where: str, what: str) -> Iterator[None]:
    """Inside the block, an allocation failure becomes ``MemoryError("<where>: …")``.

    ``what`` names the sizes that asked for the memory (``"X of shape (10, 1000000) with
    n_components=2"``). A ``MemoryError`` that already names a toolkit function passes through
    unchanged: the innermost entry point knows best what it was allocating.
    """
    try:
        yield
    except (RuntimeError, MemoryError, TypeError, ValueError, OverflowError) as err:
        if not is_allocation_failure(err) or getattr(err, "toolkit_where", None):
            raise
        new = MemoryError(f"{where}: not enough memory for {what}{_amount(err)}; use smaller "
                          f"sizes, or a device with more memory")
        new.toolkit_where = where  # type: ignore[attr-defined]
        raise new from err


def _describe(X: Any, self: Any, params: tuple[str, ...]) -> str:
    shape = getattr(X, "shape", None)
    data = f"X of shape {tuple(shape)}" if shape is not None else "X"
    sizes = [f"{name}={getattr(self, name)!r}" for name in params if hasattr(self, name)]
    return data if not sizes else f"{data} with {', '.join(sizes)}"


def reports_allocation_failures(where: str, *params: str) -> Callable[[F], F]:
    """Decorate an estimator method ``method(self, X, ...)`` with :func:`allocation_errors`;
    the message names ``X``'s shape and the estimator's ``params``."""
    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, X: Any = None, *args: Any, **kwargs: Any) -> Any:
            with allocation_errors(where, _describe(X, self, params)):
                return method(self, X, *args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorate


def sized_by(*names: str, where: str | None = None) -> Callable[[F], F]:
    """Decorate a function whose arguments ``names`` size what it allocates (``n_states``,
    ``n_actions``) with :func:`allocation_errors`, naming it (or ``where``: a class for its
    ``__init__``) and those arguments' values."""
    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind_partial(*args, **kwargs).arguments
            what = ", ".join(f"{n}={bound[n]!r}" for n in names if n in bound)
            with allocation_errors(where or fn.__name__, what):
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorate
