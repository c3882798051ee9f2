"""What ``toolkit run`` says when SIGINT or SIGTERM stops it: one summary, whatever the phase.

A :class:`Ledger` follows the command: the phase it is in (planning, the pool's processes
starting, the runs, the reports), the runs planned, how each ended, and the seed groups made
and drawn. Stopped, the command prints :meth:`Ledger.summary`, on stderr::

    toolkit: interrupted by SIGINT while the runs ran (exit status 130); of 4 runs:
      complete     results/td_learning/20250101T120000Z__seed0__a1b2c3 (10.5 s)
      interrupted  results/td_learning/20250101T120000Z__seed1__d4e5f6 (4.21 s; kept steps
                   up to 30)
      not started  2 runs
    to finish: toolkit run configs/td_learning.toml --seeds 0-3 --resume

The durations are those the runs recorded in their ``meta.json``. The command to finish is the
one given, with ``--resume`` when some run was made (it runs what is not complete, then the
seed group and its report), and ``toolkit report DIR`` for complete runs or seed groups whose
report was not drawn.
"""

from __future__ import annotations

import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown
from toolkit.lab.cli.terminal import last_step, wrapped

__all__ = ["PHASES", "Ledger"]

#: the phases of ``toolkit run``, as the summary names them
PHASES = {"planning": "while the runs were planned",
          "pool": "while the pool's processes started",
          "runs": "while the runs ran",
          "reports": "while the reports were drawn"}
#: runs listed one by one up to this many; above, counted by state
LISTED = 8


@dataclass
class Ledger:
    """What a ``toolkit run`` has done so far (see the module docstring).

    ``argv``: the command line after ``toolkit``; ``report``: whether reports are drawn
    (not ``--no-report``). Set ``phase``, ``planned`` (runs counted) and ``grouped`` as the
    command goes; record each run's start and end with :meth:`started` and :meth:`ended`,
    each seed group with
    ``groups[folder] = drawn`` and their runs in ``members``.
    """

    argv: Sequence[str]
    report: bool = True
    phase: str = "planning"
    planned: int = 0
    grouped: bool = False
    outcomes: dict[int, Any] = field(default_factory=dict)
    groups: dict[Path, bool] = field(default_factory=dict)
    members: set[Path] | None = None  # the runs in seed groups, once the groups are made

    def started(self, index: int) -> None:
        self.phase = "runs"

    def ended(self, index: int, outcome: Any) -> None:
        self.outcomes[index] = outcome

    def _undrawn(self, outcome: Any) -> bool:
        """A complete run whose own report was due and is not drawn (a run of a seed group
        has none: the group's report is drawn once the group is made)."""
        if not self.report or outcome.status != "complete":
            return False
        if self.grouped and (self.members is None or Path(outcome.run_dir) in self.members):
            return False
        return not (Path(outcome.run_dir) / "report.html").is_file()

    def _line(self, outcome: Any) -> str:
        seconds = _meta(Path(outcome.run_dir)).get("duration_s")  # as the run recorded it
        note = fmt(seconds, "s") if isinstance(seconds, (int, float)) else "duration unknown"
        if outcome.status == "interrupted":
            step = last_step(Path(outcome.run_dir))
            note += "; nothing logged" if step is None else f"; kept steps up to {step}"
        elif outcome.status == "failed" and outcome.error:
            note += f"; {outcome.error}"
        elif self._undrawn(outcome):
            note += "; report not drawn"
        return wrapped(f"{shown(outcome.run_dir)} ({note})", indent=f"  {outcome.status:<12} ",
                       more=" " * 17)

    def summary(self, signum: int) -> list[str]:
        """The lines to print once the command has stopped on signal ``signum``."""
        name = signal.Signals(signum).name
        outcomes = [self.outcomes[i] for i in sorted(self.outcomes)]
        phase = self.phase
        if any(o.status == "complete" and str(_meta(Path(o.run_dir)).get("finish_error"))
               .startswith("interrupted") for o in outcomes):
            phase = "reports"  # a run's own report was stopped
        head = f"toolkit: interrupted by {name} {PHASES[phase]} (exit status {128 + signum})"
        lines = []
        if not outcomes and not self.groups:
            lines.append(head + ("; no run had started" if self.planned else ""))
        else:
            lines.append(f"{head}; of {self.planned} run{'s' * (self.planned != 1)}:")
            if len(outcomes) <= LISTED:
                lines += [self._line(o) for o in outcomes]
            else:
                by_state: dict[str, list[Any]] = {}
                for o in outcomes:
                    by_state.setdefault(o.status, []).append(o)
                for state, runs in by_state.items():
                    where = sorted({shown(Path(o.run_dir).parent) for o in runs})
                    lines.append(wrapped(f"{len(runs)} runs in {', '.join(where)}",
                                         indent=f"  {state:<12} ", more=" " * 17))
            not_started = self.planned - len(outcomes)
            if not_started > 0:
                lines.append(f"  {'not started':<12} {not_started} run"
                             f"{'s' * (not_started != 1)}")
            for folder, drawn in self.groups.items():
                note = "" if drawn or not self.report else "  (report not drawn)"
                lines.append(wrapped(f"{shown(folder)}{note}", indent=f"  {'seed group':<12} ",
                                     more=" " * 17))
        lines += self._to_finish(outcomes)
        return lines

    def _to_finish(self, outcomes: Sequence[Any]) -> list[str]:
        """``to finish: …``: the commands that do what is left, when something is."""
        commands = []
        left = self.planned > len(outcomes) or any(o.status != "complete" for o in outcomes)
        if left:
            argv = list(self.argv)
            if outcomes and "--resume" not in argv:
                argv.append("--resume")
            commands.append(shlex.join(["toolkit", *argv]))
        undrawn = [str(o.run_dir) for o in outcomes if self._undrawn(o)]
        undrawn += [str(g) for g, drawn in self.groups.items() if not drawn and self.report]
        if undrawn:
            commands.append(shlex.join(["toolkit", "report", *undrawn]))
        if not commands:
            return ["nothing is left to do: every run is complete"]
        return [f"to finish: {commands[0]}"] + [f"           {c}" for c in commands[1:]]


def _meta(run_dir: Path) -> dict[str, Any]:
    """A run's meta.json, read as results are (a damaged one gives ``{}``)."""
    from toolkit.lab.results.view import RunResults

    try:
        return dict(RunResults(run_dir).meta)
    except Exception:  # the summary goes on without the number
        return {}
