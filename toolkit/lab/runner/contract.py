"""The experiment contract: what a module must define to be run, compared and reported.

Lightning's ``Callback`` style: every hook typed and documented in one place,
:class:`ExperimentModule`, and checked when the module is registered
(:func:`check_contract`), with a message that names the missing or wrong piece. Required:

- ``Params``: a subclass of :class:`~toolkit.lab.runner.ExperimentParams` (pydantic, unknown
  keys rejected): every parameter of the experiment, with its default;
- ``run(params, ctx)``: runs the comparison; ``ctx`` is a
  :class:`~toolkit.lab.runner.RunContext` (``ctx.compare(fn)`` runs ``fn`` with and without the
  blocks from the same random state; ``ctx.log``, ``ctx.summary``, ``ctx.costs``,
  ``ctx.save_artifact``).

Optional:

- ``QUICK``: a dict of parameter overrides for a fast run (the showcase runs it);
- ``DTYPE``: ``"float32"`` or ``"float64"``, the precision its comparison is defined in;
- ``DESCRIPTION``: one line for ``toolkit list``;
- ``STORY``: a :class:`~toolkit.lab.runner.Story` (what it compares and predicts);
- ``BLOCKS``: the names of the blocks a run can meet (else read from the names it imports);
- ``METRICS``: what each metric key the experiment logs means, a tuple of
  :class:`~toolkit.lab.schema.MetricDoc` (key pattern, meaning, unit); the docs' metrics
  glossary is rendered from it, and a test checks it against the keys a quick run logs;
- ``findings(run)``: the findings of a run (:class:`~toolkit.lab.runner.Finding` list) from
  its :class:`~toolkit.lab.runner.RunResults`;
- ``figures(run)``: ``{name: (figure, caption)}`` drawn from a run's files;
- ``parts()``: for an experiment that composes others (the showcase), the experiments a run of
  it may contain, by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from toolkit.lab.schema import MetricDoc

if TYPE_CHECKING:
    from toolkit.lab.runner.params import ExperimentParams
    from toolkit.lab.runner.results import RunResults

__all__ = ["ExperimentModule", "contract_problems"]

DTYPES = ("float32", "float64")


class ExperimentModule(Protocol):
    """The hooks of an experiment module (see the module's docstring); only ``Params`` and
    ``run`` are required."""

    Params: ClassVar[type[ExperimentParams]]
    QUICK: ClassVar[Mapping[str, Any]]
    DTYPE: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    BLOCKS: ClassVar[tuple[str, ...]]
    METRICS: ClassVar[tuple[MetricDoc, ...]]

    def run(self, params: ExperimentParams, ctx: Any) -> None: ...

    def findings(self, run: RunResults) -> list[Any]: ...

    def figures(self, run: RunResults) -> dict[str, Any]: ...

    def parts(self) -> dict[str, Any]: ...


def _takes(fn: Callable[..., Any], n: int) -> bool:
    """Whether ``fn`` can be called with ``n`` positional arguments."""
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): trust it
        return True
    return True


#: optional callables: name -> (arguments, how it is called)
_HOOKS = {"run": (2, "run(params, ctx)"), "findings": (1, "findings(run)"),
          "figures": (1, "figures(run)"), "parts": (0, "parts()")}


def contract_problems(module: ModuleType) -> list[str]:
    """What ``module`` gets wrong of the contract beyond ``Params`` and ``QUICK`` (checked by
    the registry): each a sentence naming the hook and what it must be; empty when it keeps
    to it."""
    problems = []
    for name, (n, call) in _HOOKS.items():
        value = getattr(module, name, None)
        if value is None:
            if name == "run":
                problems.append("it must define `run(params, ctx)`")
            continue
        if not callable(value):
            problems.append(f"`{name}` must be a function called as `{call}`, got "
                            f"{type(value).__name__}")
        elif not _takes(value, n):
            problems.append(f"`{name}` must accept {n} argument{'s' * (n != 1)} "
                            f"(`{call}`), its signature is {name}{inspect.signature(value)}")
    dtype = getattr(module, "DTYPE", None)
    if dtype is not None and dtype not in DTYPES:
        problems.append(f"DTYPE must be one of {', '.join(map(repr, DTYPES))}, got {dtype!r}")
    description = getattr(module, "DESCRIPTION", None)
    if description is not None and not isinstance(description, str):
        problems.append(f"DESCRIPTION must be a string, got {type(description).__name__}")
    blocks = getattr(module, "BLOCKS", None)
    if blocks is not None and not (isinstance(blocks, (tuple, list))
                                   and all(isinstance(b, str) for b in blocks)):
        problems.append("BLOCKS must be a tuple of block names (strings)")
    problems += _metrics_problems(getattr(module, "METRICS", None))
    return problems


def _metrics_problems(metrics: Any) -> list[str]:
    """What is wrong with a ``METRICS`` hook (``None``: not defined, nothing wrong)."""
    if metrics is None:
        return []
    if not (isinstance(metrics, (tuple, list)) and all(isinstance(m, MetricDoc) for m in metrics)):
        return ["METRICS must be a tuple of toolkit.lab.schema.MetricDoc (key pattern, "
                "meaning, unit)"]
    keys = [m.key for m in metrics]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    return [f"METRICS declares {', '.join(twice)} more than once"] if twice else []
