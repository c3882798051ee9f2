"""The lab: experiments run with and without their blocks, and what they leave behind.

Data flow one way, in three folders:

- :mod:`toolkit.lab.plan` — experiments found (entry points, loose files) and checked; a config
  read once and turned into validated runs;
- :mod:`toolkit.lab.execute` — a run's life (folder, lock, files, ``complete`` last), here, in
  a process pool or on Dask; ``--resume``;
- :mod:`toolkit.lab.results` — one schema for every file a run writes; runs and seed groups
  read back as hostile input; findings and their verdicts over seeds; ``check``.

Around them: :mod:`toolkit.lab.report` (figures, ``report.html``/``report.md`` and ``compare``,
drawn only from a run's files), :mod:`toolkit.lab.cli` (the ``toolkit`` command line: it parses
and hands over), :mod:`toolkit.lab.measure` (timers, memory, interleaved rounds),
:mod:`toolkit.lab.data` (datasets, no downloads) and :mod:`toolkit.lab.style` (one palette).

The names an experiment is written with are here, loaded on first use (the command line reads
configs and lists experiments without importing torch). The lab builds on
:mod:`toolkit.algorithms`, :mod:`toolkit.lens` and :mod:`toolkit.core`; none of them imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit._utils.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("ConfigError", "DamagedFile", "ExperimentLoadError", "RunInterrupted"),
                    "toolkit.lab.errors"),
    **dict.fromkeys(("Experiment", "ExperimentParams", "discover", "load_all", "load_experiment"),
                    "toolkit.lab.plan.registry"),
    **dict.fromkeys(("Plan", "RunSpec", "plan_one"), "toolkit.lab.plan.config"),
    "RunContext": "toolkit.lab.execute.context",
    **dict.fromkeys(("RunOutcome", "run_experiment"), "toolkit.lab.execute.run"),
    "run_all": "toolkit.lab.execute.local",
    **dict.fromkeys(("Finding", "Headline", "Story", "TimeRatio", "Verdict"),
                    "toolkit.lab.results.findings"),
    **dict.fromkeys(("BLOCKED", "UNBLOCKED", "VARIANTS", "MetricDoc", "RunConfig", "metric_key"),
                    "toolkit.lab.results.schema"),
    **dict.fromkeys(("RunResults", "SeedGroup", "find_runs"), "toolkit.lab.results.view"),
    **dict.fromkeys(("group_runs", "read_findings", "write_group"),
                    "toolkit.lab.results.records"),
    "fmt": "toolkit._utils.formatting",
}
__all__ = [
    "BLOCKED",
    "UNBLOCKED",
    "VARIANTS",
    "ConfigError",
    "DamagedFile",
    "Experiment",
    "ExperimentLoadError",
    "ExperimentParams",
    "Finding",
    "Headline",
    "MetricDoc",
    "Plan",
    "RunConfig",
    "RunContext",
    "RunInterrupted",
    "RunOutcome",
    "RunResults",
    "RunSpec",
    "SeedGroup",
    "Story",
    "TimeRatio",
    "Verdict",
    "discover",
    "find_runs",
    "fmt",
    "group_runs",
    "load_all",
    "load_experiment",
    "metric_key",
    "plan_one",
    "read_findings",
    "run_all",
    "run_experiment",
    "write_group",
]

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and IDEs
    from toolkit._utils.formatting import fmt
    from toolkit.lab.errors import ConfigError, DamagedFile, ExperimentLoadError, RunInterrupted
    from toolkit.lab.execute.context import RunContext
    from toolkit.lab.execute.local import run_all
    from toolkit.lab.execute.run import RunOutcome, run_experiment
    from toolkit.lab.plan.config import Plan, RunSpec, plan_one
    from toolkit.lab.plan.registry import (
        Experiment,
        ExperimentParams,
        discover,
        load_all,
        load_experiment,
    )
    from toolkit.lab.results.findings import Finding, Headline, Story, TimeRatio, Verdict
    from toolkit.lab.results.records import group_runs, read_findings, write_group
    from toolkit.lab.results.schema import (
        BLOCKED,
        UNBLOCKED,
        VARIANTS,
        MetricDoc,
        RunConfig,
        metric_key,
    )
    from toolkit.lab.results.view import RunResults, SeedGroup, find_runs

__getattr__, __dir__ = lazy_exports("toolkit.lab", globals(), _EXPORTS)
