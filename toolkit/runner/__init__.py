"""The experiment runner: configs, run contexts, results, sweeps.

Write an experiment as ``experiments/<name>.py`` with ``Params(ExperimentParams)`` and
``run(params, ctx: RunContext)``; run it with ``toolkit run CONFIG`` or :func:`run_experiment`;
read it back with :class:`RunResults`.
"""

from toolkit.runner.config import RunConfig, load_config, make_config, parse_override
from toolkit.runner.context import RunContext, seed_everything
from toolkit.runner.errors import ConfigError, ExperimentLoadError, RunInterrupted
from toolkit.runner.params import ExperimentParams
from toolkit.runner.registry import Experiment, config_files, discover, load_all, load_experiment
from toolkit.runner.results import RunResults, find_runs
from toolkit.runner.run import RunOutcome, execute, run_experiment

__all__ = [
    "ConfigError",
    "Experiment",
    "ExperimentLoadError",
    "ExperimentParams",
    "RunConfig",
    "RunContext",
    "RunInterrupted",
    "RunOutcome",
    "RunResults",
    "config_files",
    "discover",
    "execute",
    "find_runs",
    "load_all",
    "load_config",
    "load_experiment",
    "make_config",
    "parse_override",
    "run_experiment",
    "seed_everything",
]
