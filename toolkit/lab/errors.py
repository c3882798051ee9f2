"""The lab's errors, each printed by the command line as one line; everything a user gave or a
folder holds is echoed through :func:`echo`: on one line, escaped, cut short."""

from __future__ import annotations

import difflib
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import shown

__all__ = ["ConfigError", "DamagedFile", "ExperimentLoadError", "OutsideFolder",
           "RunInterrupted", "cut", "echo", "os_error_line", "suggest"]

def cut(text: str, limit: int = 80) -> str:
    """``text`` on one line, control characters escaped, cut to ``limit`` characters:
    ``cut("x" * 100)[-12:] == "xxx…(100 ch)"``."""
    text = shown(text)
    return text if len(text) <= limit else f"{text[:limit - 12]}…({len(text)} ch)"


def echo(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for an error line, through :func:`cut`."""
    return cut(repr(value), limit)


class ConfigError(ValueError):
    """A mistake in user input, printed as ``<source>: <key>: <problem>; <fix>`` (exit status 2):
    ``source`` the file or option, ``key`` the dotted key path (empty: the whole input)."""

    def __init__(self, source: str, key: str, problem: str, fix: str = "") -> None:
        self.source, self.key, self.problem, self.fix = str(source), key, problem, fix
        super().__init__(self.line())

    def line(self) -> str:
        parts = [shown(self.source), *([shown(self.key)] if self.key else []), self.problem]
        text = ": ".join(parts) + (f"; {self.fix}" if self.fix else "")
        return " ".join(text.split())  # one line, always


class DamagedFile(ValueError):
    """A results file that cannot be read as the results format says (``path``, ``problem``)."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{shown(self.path)}: {self.problem}")


class OutsideFolder(DamagedFile):
    """A path the lab would write, delete or read that resolves outside its folder (through a
    symbolic link, or ``..``); ``path`` is the link, else the path."""


class ExperimentLoadError(RuntimeError):
    """An experiment module exists but cannot be imported or does not follow the contract."""

    def __init__(self, name: str, problem: str) -> None:
        self.name, self.problem = name, problem
        super().__init__(f"experiment {name!r} cannot be loaded: {problem}")


class RunInterrupted(KeyboardInterrupt):
    """Raised inside a run when SIGINT or SIGTERM arrives; the run is marked ``interrupted``."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")

    def __reduce__(self) -> tuple[type[RunInterrupted], tuple[int]]:
        return type(self), (self.signum,)  # it crosses processes (a pool, Dask) by its number


def suggest(word: str, candidates: Iterable[str]) -> str:
    """``"did you mean 'x'?"`` for the nearest candidate, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def os_error_line(err: OSError) -> str:
    """``"<file>: <reason>"`` of an ``OSError`` (``"/r/meta.json: No space left on device"``)."""
    reason = err.strerror or str(err) or type(err).__name__
    return f"{shown(err.filename)}: {reason}" if err.filename else reason
