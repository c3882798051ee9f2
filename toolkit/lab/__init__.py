"""The lab: experiments run with and without their blocks, and what they leave behind.

Data flows one way: :mod:`~toolkit.lab.plan` (configs into runs), :mod:`~toolkit.lab.execute`
(the runs), :mod:`~toolkit.lab.results` (their files); :mod:`~toolkit.lab.report` and
:mod:`~toolkit.lab.cli` around them. The names an experiment uses are here, loaded on first use.
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
