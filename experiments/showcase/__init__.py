"""The showcase: every experiment's quick comparison in one run and one report.

An experiment like the others (registered through the ``toolkit.experiments`` entry points),
that composes them: it defines ``parts()``, the experiments a run of it may contain. A config
with ``experiment = "showcase"`` lists the experiments to run (``[params] experiments``, empty
for all) and their overrides.

For each selected experiment that defines ``QUICK`` (its fast params: the only source of them)
the showcase validates its ``Params`` from ``QUICK`` plus ``overrides`` when the config is
loaded, before anything runs, then runs it in a child context: metrics are prefixed with the
experiment's name, summary and costs nested under it, artifacts in ``artifacts/<name>/``. Each
child starts from the showcase's seed, so it computes what ``toolkit run`` of the same
experiment with the same params, seed and dtype would. The report has one section per
experiment.

A child runs in the experiment's ``DTYPE`` when its module declares one (the precision its
comparison is defined in, e.g. float64 for scikit-learn parity), otherwise in the showcase's
dtype; every child uses the showcase's ``disable_blocks``.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from toolkit.lab import (
    Experiment,
    ExperimentParams,
    RunContext,
    RunResults,
    discover,
    load_all,
)
from toolkit.lab.errors import suggest

DESCRIPTION = "runs every experiment's QUICK comparison and writes one report"
NAME = "showcase"  # its own name: it never includes itself, nor another composite


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
        known = [n for n in discover() if n != NAME]
        for name in names:
            if name == NAME:
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

    _children: dict[str, ExperimentParams] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _children_valid(self) -> Params:
        # every child's params are checked when the config is planned (also by --dry-run),
        # once: the run uses them as they are
        self._children = child_params(self)
        return self

    def children(self) -> dict[str, ExperimentParams]:
        """Each selected experiment's validated ``Params``, by name (made with these; made
        again in a process these params were sent to, which keeps no private cache)."""
        if not self._children:
            self._children = child_params(self)
        return dict(self._children)


Found = tuple[dict[str, Experiment], dict[str, str]]


def child_params(params: Params, found: Found | None = None) -> dict[str, ExperimentParams]:
    """Each selected experiment's validated ``Params`` (``QUICK`` + overrides), by name.

    ``found``: what :func:`~toolkit.lab.plan.registry.load_all` returned, if the caller has it.
    Raises ``ValueError`` with one line naming the experiment and the key.
    """
    found = found or load_all()
    loaded = found[0]
    out = {}
    for name in select(params, found):
        exp = loaded[name]
        values = {**(exp.quick or {}), **params.overrides.get(name, {})}
        try:
            out[name] = exp.Params.model_validate(values)
        except ValidationError as err:
            first = err.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            problem = first["msg"].removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                fields = list(exp.Params.model_fields)
                hint = suggest(key, fields)
                problem = "unknown key" + (f"; {hint}" if hint else
                                           f" (valid keys: {', '.join(fields)})")
            raise ValueError(f"overrides.{name}.{key}: {problem}") from None
    return out


def parts() -> dict[str, Experiment]:
    """Every experiment the showcase can run (their findings and figures make its report)."""
    return load_all()[0]


def select(params: Params, found: Found | None = None) -> list[str]:
    """The experiments to run; ``ValueError`` when one cannot be loaded or has no QUICK.
    ``found``: as in :func:`child_params`."""
    loaded, broken = found or load_all()
    if params.experiments:
        names = list(params.experiments)
    else:
        names = sorted(n for n in [*loaded, *broken] if n != NAME
                       and (n in broken or (loaded[n].quick is not None
                                            and not callable(getattr(loaded[n].module, "parts",
                                                                     None)))))
    problems = []
    for name in names:
        if name in broken:
            problems.append(f"{name}: {broken[name]}")
        elif loaded[name].quick is None:
            problems.append(f"{name}: defines no QUICK params")
    if problems:
        raise ValueError("cannot run " + "; ".join(problems))
    if not names:
        raise ValueError("no experiment defines QUICK")
    return names


def run(params: Params, ctx: RunContext) -> None:
    import torch

    found = load_all()
    names, loaded = select(params, found), found[0]
    children = params.children()
    for name in ctx.progress(names, desc="showcase"):
        if ctx.carried(name):  # finished before an interrupt (--resume)
            continue
        exp = loaded[name]
        dtype = exp.dtype
        child = ctx.child(name, experiment=name, params=children[name],
                          dtype=getattr(torch, dtype) if dtype else None)
        cpu0 = time.process_time()
        try:
            with ctx.timer(name) as timer:
                exp.run(children[name], child)
        except Exception as err:
            raise RuntimeError(f"showcase: experiment {name!r} failed: "
                               f"{type(err).__name__}: {err}") from err
        ctx.say(f"{name:<22} {timer.seconds:6.1f} s")
        # CPU seconds of this process (all threads): steadier than wall time on a busy machine
        ctx.costs(cpu_seconds={name: time.process_time() - cpu0})
        ctx.child_done(name)  # its files are final: the report may draw its section now
    ctx.summary(experiments=names)


def figures(run: RunResults) -> dict[str, Any]:
    """Wall time of each experiment's quick comparison (both variants together)."""
    import matplotlib.pyplot as plt

    from toolkit.lab.style import variant_style

    timers = run.costs.get("timers", {})
    names = [n for n in run.children if n in timers]
    if not names:
        return {}
    fig, ax = plt.subplots(figsize=(6.4, 1.2 + 0.32 * len(names)), layout="constrained")
    ax.barh(names, [timers[n] for n in names], color=variant_style("reference")["color"])
    ax.set_xlabel("seconds on this machine (blocked and unblocked together)")
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    return {"time": (fig, "Wall time of each experiment's quick comparison in this run.")}
