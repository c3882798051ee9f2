"""The experiment runner: configs, run contexts, results, sweeps.

Write an experiment as a module with ``Params(ExperimentParams)`` and
``run(params, ctx: RunContext)``, declared as an entry point of the group
``toolkit.experiments``; run it with ``toolkit run CONFIG`` or :func:`run_experiment`; read it
back with :class:`RunResults`.

Names are loaded on first use (PEP 562): the command line reads configs and lists experiments
without importing torch.
"""

# ruff: noqa: F401
# (the imports below are the public list; ruff cannot see that ``__all__`` is built from them)

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit._utils.lazy import imported_names, lazy_exports

if TYPE_CHECKING:  # pragma: no cover - the one list: read by type checkers, IDEs and _lazy
    from toolkit.runner.config import RunConfig, load_config, make_config, parse_override
    from toolkit.runner.context import RunContext, seed_everything
    from toolkit.runner.errors import ConfigError, ExperimentLoadError, RunInterrupted
    from toolkit.runner.params import ExperimentParams
    from toolkit.runner.registry import (
        Experiment,
        config_files,
        discover,
        experiments_for,
        load_all,
        load_experiment,
    )
    from toolkit.runner.results import RunResults, find_runs
    from toolkit.runner.run import RunOutcome, execute, run_experiment
    from toolkit.runner.seeds import SeedGroup, group_runs, write_group
    from toolkit.runner.story import Finding, Story, TimeRatio, fmt
    from toolkit.runner.verdicts import Verdict, aggregate, read_findings

# public name -> module that defines it, read from the imports above (not run: no torch yet)
_EXPORTS: dict[str, str] = imported_names(__file__, "toolkit.runner")
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports("toolkit.runner", globals(), _EXPORTS)
