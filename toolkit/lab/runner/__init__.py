"""The experiment runner: configs, run contexts, results, sweeps.

Write an experiment as a module with ``Params(ExperimentParams)`` and
``run(params, ctx: RunContext)``, declared as an entry point of the group
``toolkit.experiments``; run it with ``toolkit run CONFIG`` or :func:`run_experiment`; read it
back with :class:`RunResults`. In between, :func:`plan` turns a config into
:class:`RunSpec` objects (validated once) and :func:`execute` runs one.

Names are loaded on first use (PEP 562): the command line reads configs and lists experiments
without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit._utils.lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: no torch yet)
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("RunConfig", "parse_override"), "toolkit.lab.runner.config"),
    **dict.fromkeys(("RunSpec", "load_config", "make_config", "plan", "plan_one"),
                    "toolkit.lab.runner.planning"),
    **dict.fromkeys(("RunContext", "seed_everything"), "toolkit.lab.runner.context"),
    **dict.fromkeys(("ConfigError", "ExperimentLoadError", "RunInterrupted"),
                    "toolkit.lab.runner.errors"),
    "ExperimentParams": "toolkit.lab.runner.params",
    **dict.fromkeys(("Experiment", "config_files", "discover", "experiments_for", "load_all",
                     "load_experiment"), "toolkit.lab.runner.registry"),
    **dict.fromkeys(("RunResults", "find_runs"), "toolkit.lab.runner.results"),
    **dict.fromkeys(("RunOutcome", "execute", "run_experiment"), "toolkit.lab.runner.run"),
    **dict.fromkeys(("SeedGroup", "group_runs", "write_group"), "toolkit.lab.runner.seeds"),
    **dict.fromkeys(("Finding", "Story", "TimeRatio", "fmt"), "toolkit.lab.runner.story"),
    **dict.fromkeys(("Verdict", "aggregate", "read_findings"), "toolkit.lab.runner.verdicts"),
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
    "RunSpec",
    "SeedGroup",
    "Story",
    "TimeRatio",
    "Verdict",
    "aggregate",
    "config_files",
    "discover",
    "execute",
    "experiments_for",
    "find_runs",
    "fmt",
    "group_runs",
    "load_all",
    "load_config",
    "load_experiment",
    "make_config",
    "parse_override",
    "plan",
    "plan_one",
    "read_findings",
    "run_experiment",
    "seed_everything",
    "write_group",
]

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and IDEs
    from toolkit.lab.runner.config import RunConfig, parse_override
    from toolkit.lab.runner.context import RunContext, seed_everything
    from toolkit.lab.runner.errors import ConfigError, ExperimentLoadError, RunInterrupted
    from toolkit.lab.runner.params import ExperimentParams
    from toolkit.lab.runner.planning import RunSpec, load_config, make_config, plan, plan_one
    from toolkit.lab.runner.registry import (
        Experiment,
        config_files,
        discover,
        experiments_for,
        load_all,
        load_experiment,
    )
    from toolkit.lab.runner.results import RunResults, find_runs
    from toolkit.lab.runner.run import RunOutcome, execute, run_experiment
    from toolkit.lab.runner.seeds import SeedGroup, group_runs, write_group
    from toolkit.lab.runner.story import Finding, Story, TimeRatio, fmt
    from toolkit.lab.runner.verdicts import Verdict, aggregate, read_findings

__getattr__, __dir__ = lazy_exports("toolkit.lab.runner", globals(), _EXPORTS)
