"""Every experiment's quick comparison in one run and one report.

For each selected experiment that defines ``QUICK`` the showcase validates its ``Params`` from
``QUICK`` (plus ``overrides``), then runs it in a child context: metrics are prefixed with the
experiment's name, summary and costs nested under it, artifacts in ``artifacts/<name>/``. Each
child starts from the showcase's seed, so it computes what ``toolkit run`` of the same
experiment with the same params, seed and dtype would. The report has one section per
experiment with its own figures and the default ones.

A child's dtype and disable_blocks come from ``configs/<name>_quick.toml`` when that file sets
them, otherwise from the showcase config.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, field_validator

from toolkit.runner import (
    ExperimentParams,
    RunContext,
    RunResults,
    config_files,
    discover,
    load_all,
)
from toolkit.runner.config import DTYPES
from toolkit.runner.errors import suggest
from toolkit.runner.tomlio import loads as toml_loads

DESCRIPTION = "runs every experiment's QUICK comparison and writes one report"


class Params(ExperimentParams):
    experiments: list[str] = Field(
        default_factory=list,
        description="experiments to run, in this order (empty: every one that defines QUICK)")
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per-experiment params on top of QUICK, e.g. {em_gmm = {n_iter = 5}}")

    @field_validator("experiments")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        known = [n for n in discover() if n != "showcase"]
        for name in names:
            if name == "showcase":
                raise ValueError("the showcase cannot include itself")
            if name not in known:
                hint = suggest(name, known)
                raise ValueError(f"unknown experiment {name!r}"
                                 + (f"; {hint}" if hint else f"; known: {', '.join(known)}"))
        if len(set(names)) != len(names):
            raise ValueError(f"experiments are listed twice in {names}")
        return names

    @field_validator("overrides")
    @classmethod
    def _known_overrides(cls, overrides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        known = list(discover())
        for name in overrides:
            if name not in known:
                hint = suggest(name, known)
                raise ValueError(f"overrides for unknown experiment {name!r}"
                                 + (f"; {hint}" if hint else ""))
        return overrides


def _quick_config(name: str) -> dict[str, Any]:
    for path in config_files():
        if path.name == f"{name}_quick.toml":
            try:
                return toml_loads(path.read_text(encoding="utf-8"))
            except Exception:  # a broken quick config does not decide the child's dtype
                return {}
    return {}


def select(params: Params) -> list[str]:
    """The experiments to run; raises when one cannot be loaded or has no QUICK."""
    loaded, broken = load_all()
    if params.experiments:
        names = list(params.experiments)
    else:
        names = sorted(n for n in [*loaded, *broken] if n != "showcase"
                       and (n in broken or loaded[n].quick is not None))
    problems = []
    for name in names:
        if name in broken:
            problems.append(f"{name}: {broken[name]}")
        elif loaded[name].quick is None:
            problems.append(f"{name}: defines no QUICK params")
    if problems:
        raise RuntimeError("showcase: cannot run " + "; ".join(problems))
    if not names:
        raise RuntimeError("showcase: no experiment defines QUICK")
    return names


def run(params: Params, ctx: RunContext) -> None:
    names = select(params)
    loaded, _ = load_all()
    # validate every child's params before running any of them
    child_params = {}
    for name in names:
        exp = loaded[name]
        values = {**(exp.quick or {}), **params.overrides.get(name, {})}
        try:
            child_params[name] = exp.Params.model_validate(values)
        except Exception as err:
            raise ValueError(f"showcase: QUICK/overrides of {name!r} are not valid: {err}"
                             ) from None
    for name in ctx.progress(names, desc="showcase"):
        exp = loaded[name]
        quick = _quick_config(name)
        dtype = DTYPES.get(str(quick.get("dtype")))
        patterns = quick.get("disable_blocks")
        patterns = [str(p) for p in patterns] if isinstance(patterns, list) else None
        child = ctx.child(name, experiment=name, params=child_params[name], dtype=dtype,
                          disable_patterns=patterns)
        cpu0 = time.process_time()
        try:
            with ctx.timer(name):
                exp.run(child_params[name], child)
        except Exception as err:
            raise RuntimeError(f"showcase: experiment {name!r} failed: "
                               f"{type(err).__name__}: {err}") from err
        # CPU seconds of this process (all threads): steadier than wall time on a busy machine
        ctx.costs(cpu_seconds={name: time.process_time() - cpu0})
    ctx.summary(experiments=names)


def figures(run: RunResults) -> dict[str, Any]:
    """Wall time of each experiment's quick comparison (both variants together)."""
    import matplotlib.pyplot as plt

    timers = run.costs.get("timers", {})
    names = [n for n in run.children if n in timers]
    if not names:
        return {}
    fig, ax = plt.subplots(figsize=(6.4, 1.6 + 0.35 * len(names)))
    ax.barh(names, [timers[n] for n in names], color="C2")
    ax.set_xlabel("seconds (this machine)")
    ax.set_title("time of each experiment's quick comparison")
    ax.invert_yaxis()
    fig.tight_layout()
    return {"time": fig}
