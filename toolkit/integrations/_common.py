"""What the framework callbacks share: their options, when they audit, what a finding does,
and the error that names a missing extra."""

from __future__ import annotations

import contextlib
import importlib
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from toolkit._utils.lazy import install_line
from toolkit.audit import StepAudit
from toolkit.lens import GradientLeakError

__all__ = ["AuditOptions", "AuditWarning", "patched", "report", "require"]

_MISSING = object()


class AuditWarning(UserWarning):
    """The report of an audit that found something, when the callback was made with
    ``on_finding="warn"``."""


def require(modules: tuple[str, ...], extra: str, where: str) -> ModuleType:
    """The first of ``modules`` that imports, or an ``ImportError`` naming the extra to
    install."""
    errors = []
    for module in modules:
        try:
            return importlib.import_module(module)
        except ImportError as err:
            errors.append(f"{module}: {err}")
    raise ImportError(f"{where} needs the {extra!r} extra, which is not installed: "
                      f"{install_line(extra)} "
                      f"(import failed: {'; '.join(errors)})")


@dataclass
class AuditOptions:
    """A callback's options (checked once, in its ``__init__``) and its schedule.

    ``every_n_steps``: ``None`` audits the first step only; ``n`` audits steps 0, n, 2n, ...
    (a step the callback cannot audit, e.g. one whose training step returns no loss, moves
    the audit to the next step). ``on_finding``: ``"raise"`` (a
    :class:`~toolkit.GradientLeakError`, as :func:`~toolkit.assert_clean_step` raises) or
    ``"warn"`` (an :class:`AuditWarning`, and training goes on).
    """

    every_n_steps: int | None = None
    on_finding: str = "raise"
    allow_pass_through: bool = True
    allow_trained_target: bool = False
    next_step: float = 0

    def __post_init__(self) -> None:
        where = "AuditCallback"
        n = self.every_n_steps
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"{where}: every_n_steps must be None (the first step only) or an "
                             f"integer >= 1, got {n!r}")
        if self.on_finding not in ("raise", "warn"):
            raise ValueError(f"{where}: on_finding must be 'raise' or 'warn', got "
                             f"{self.on_finding!r}")
        for flag in ("allow_pass_through", "allow_trained_target"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{where}: {flag} must be a bool, got "
                                f"{type(getattr(self, flag)).__name__}")

    def due(self, step: int) -> bool:
        """Whether step ``step`` (counted from 0) is to be audited."""
        return step >= self.next_step

    def audited(self, step: int) -> None:
        """Step ``step`` was audited: schedule the next one."""
        self.next_step = step + self.every_n_steps if self.every_n_steps else math.inf

    def audit_kwargs(self) -> dict[str, bool]:
        """The options :func:`~toolkit.audit_step` takes."""
        return {"allow_pass_through": self.allow_pass_through,
                "allow_trained_target": self.allow_trained_target}


def report(audit: StepAudit | None, options: AuditOptions, what: str,
           found_anywhere: bool) -> None:
    """Act on an audit (``None``: this process could not audit its batch): raise or warn
    when ``found_anywhere`` (this process's audit, or any process's in distributed training:
    every process must raise, or the others hang)."""
    __tracebackhide__ = True
    if not found_anywhere:
        return
    text = (str(audit) if audit is not None and not audit.ok
            else "another process's audit found something; this process's "
                 + ("step is clean" if audit is not None else "batch could not be audited"))
    message = f"{what}:\n{text}"
    if options.on_finding == "warn":
        warnings.warn(message, AuditWarning, stacklevel=3)
        return
    leaks = audit.leaks if audit is not None else ()
    err = GradientLeakError(message, {leak.parameter: list(leak.path) for leak in leaks})
    err.audit = audit  # type: ignore[attr-defined]
    raise err


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    """Set the instance attribute ``obj.name`` for the ``with`` block, then put back exactly
    what the instance held (another instance attribute, or nothing)."""
    held = vars(obj).get(name, _MISSING)
    object.__setattr__(obj, name, value)
    try:
        yield
    finally:
        if held is _MISSING:
            with contextlib.suppress(AttributeError):
                object.__delattr__(obj, name)
        else:
            object.__setattr__(obj, name, held)
