"""The lab: experiments run with and without their blocks, and what they leave behind.

Data flow one way: :mod:`toolkit.lab.plan` (experiments found, a config read and validated once
into runs), :mod:`toolkit.lab.execute` (a run's life, here, in a process pool or on Dask;
``--resume``), :mod:`toolkit.lab.results` (one schema for every file a run writes, read back as
hostile input; findings; ``check``). Around them: :mod:`toolkit.lab.report` (figures, reports,
``compare``), :mod:`toolkit.lab.cli` (the ``toolkit`` command line: it parses and hands over),
:mod:`toolkit.lab.measure`, :mod:`toolkit.lab.data` and :mod:`toolkit.lab.style`.

The names an experiment is written with are here, loaded on first use (the command line reads
configs and lists experiments without importing torch). The lab builds on
:mod:`toolkit.algorithms`, :mod:`toolkit.lens` and :mod:`toolkit.core`; none of them imports it.
"""

from __future__ import annotations

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
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("toolkit.lab", globals(), _EXPORTS)
