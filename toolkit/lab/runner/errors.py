"""Errors of the runner: user-input errors (exit status 2) and run outcomes."""

from __future__ import annotations

import difflib
import signal
from collections.abc import Iterable
from pathlib import Path

from toolkit._utils.formatting import shown

__all__ = ["ConfigError", "DamagedFile", "ExperimentLoadError", "RunInterrupted", "os_error_line",
           "suggest"]


class ConfigError(ValueError):
    """A mistake in user input (config file, ``--set``, command-line option).

    Printed by the CLI as one line ``toolkit: error: <source>: <key>: <problem>; <fix>`` and
    turned into exit status 2. ``source`` is the file (or ``--set``/option) the mistake is in,
    ``key`` the dotted key path (``params.n_components``; empty when the whole file is at fault).
    """

    def __init__(self, source: str, key: str, problem: str, fix: str = "") -> None:
        self.source = str(source)
        self.key = key
        self.problem = problem
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        parts = [shown(self.source)]
        if self.key:
            parts.append(self.key)
        text = ": ".join([*parts, self.problem])
        if self.fix:
            text += f"; {self.fix}"
        return " ".join(text.split())  # one line, always


class DamagedFile(ValueError):
    """A results file that exists but cannot be read as the results format says (cut short,
    corrupt, of the wrong shape). ``path`` is the file, ``problem`` what is wrong with it.

    The command line prints it as one line naming the file; ``toolkit check`` lists them all.
    """

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        self.problem = " ".join(str(problem).split())
        super().__init__(f"{shown(self.path)}: {self.problem}")


class ExperimentLoadError(RuntimeError):
    """An experiment module exists but cannot be imported or does not follow the contract."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(f"experiment {name!r} cannot be loaded: {problem}")


class RunInterrupted(KeyboardInterrupt):
    """Raised inside a run when SIGINT or SIGTERM arrives; the run is marked ``interrupted``."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")

    @property
    def exit_code(self) -> int:
        """The conventional shell status: 128 + signal number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


def suggest(word: str, candidates: Iterable[str]) -> str:
    """``"did you mean 'x'?"`` for the nearest candidate (difflib), or ``""`` when none is close."""
    candidates = list(candidates)
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return ""


def os_error_line(err: OSError) -> str:
    """``"<file>: <reason>"`` of an ``OSError`` (``"/r/meta.json: No space left on device"``)."""
    reason = err.strerror or str(err) or type(err).__name__
    return f"{shown(err.filename)}: {reason}" if err.filename else reason
