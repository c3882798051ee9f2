"""The experiment runner: configs, run contexts, results, sweeps.

Write an experiment as ``experiments/<name>.py`` with ``Params(ExperimentParams)`` and
``run(params, ctx: RunContext)``; run it with ``toolkit run CONFIG`` or :func:`run_experiment`;
read it back with :class:`RunResults`.

Names are loaded on first use (PEP 562): the command line reads configs and lists experiments
without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["RunConfig", "load_config", "make_config", "parse_override"],
                    "toolkit.runner.config"),
    **dict.fromkeys(["RunContext", "seed_everything"], "toolkit.runner.context"),
    **dict.fromkeys(["ConfigError", "ExperimentLoadError", "RunInterrupted"],
                    "toolkit.runner.errors"),
    "ExperimentParams": "toolkit.runner.params",
    **dict.fromkeys(["Experiment", "config_files", "discover", "load_all", "load_experiment"],
                    "toolkit.runner.registry"),
    **dict.fromkeys(["RunResults", "find_runs"], "toolkit.runner.results"),
    **dict.fromkeys(["RunOutcome", "execute", "run_experiment"], "toolkit.runner.run"),
    **dict.fromkeys(["Finding", "Story", "TimeRatio", "fmt"], "toolkit.runner.story"),
    **dict.fromkeys(["Verdict", "aggregate", "read_findings"], "toolkit.runner.verdicts"),
    **dict.fromkeys(["SeedGroup", "group_runs", "write_group"], "toolkit.runner.seeds"),
}

__all__ = [
    "ConfigError",
    "Experiment",
    "ExperimentLoadError",
    "ExperimentParams",
    "Finding",
    "RunConfig",
    "RunContext",
    "RunInterrupted",
    "RunOutcome",
    "RunResults",
    "SeedGroup",
    "Story",
    "TimeRatio",
    "Verdict",
    "aggregate",
    "config_files",
    "discover",
    "execute",
    "find_runs",
    "fmt",
    "group_runs",
    "load_all",
    "load_config",
    "load_experiment",
    "make_config",
    "parse_override",
    "read_findings",
    "run_experiment",
    "seed_everything",
    "write_group",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from toolkit.runner.config import RunConfig, load_config, make_config, parse_override
    from toolkit.runner.context import RunContext, seed_everything
    from toolkit.runner.errors import ConfigError, ExperimentLoadError, RunInterrupted
    from toolkit.runner.params import ExperimentParams
    from toolkit.runner.registry import (
        Experiment,
        config_files,
        discover,
        load_all,
        load_experiment,
    )
    from toolkit.runner.results import RunResults, find_runs
    from toolkit.runner.run import RunOutcome, execute, run_experiment
    from toolkit.runner.seeds import SeedGroup, group_runs, write_group
    from toolkit.runner.story import Finding, Story, TimeRatio, fmt
    from toolkit.runner.verdicts import Verdict, aggregate, read_findings


__getattr__, __dir__ = lazy_exports("toolkit.runner", globals(), _EXPORTS)
