"""What the blocked, unblocked, torch and fused softmax cost per forward+backward: graph
nodes and saved bytes (deterministic, for the summary), time and peak memory (measured, for
``costs.json``), in interleaved rounds. ``run`` in ``__init__.py`` calls :func:`run_costs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from toolkit import disable_blocks
from toolkit.algorithms.softmax import stable_softmax
from toolkit.lab.measure import count_graph_nodes, measure_memory, race
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

if TYPE_CHECKING:
    from toolkit.lab import RunContext

    from . import Params

COST_VARIANTS = (BLOCKED, UNBLOCKED, "torch", "fused")


def _variant_fn(variant: str, disable: tuple[str, ...]) -> Any:
    def unblocked(x: torch.Tensor) -> torch.Tensor:
        with disable_blocks(*disable):
            return stable_softmax(x)

    return {BLOCKED: stable_softmax, UNBLOCKED: unblocked,
            "torch": lambda x: torch.softmax(x, -1),
            "fused": lambda x: stable_softmax(x, impl="fused")}[variant]


def _fwd_bwd(fn: Any, x: torch.Tensor, g: torch.Tensor) -> Any:
    def step() -> None:
        fn(x).backward(g)
        x.grad = None
    return step


def run_costs(params: Params, ctx: RunContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns (deterministic numbers for the summary, measured numbers for costs.json)."""
    summary: dict[str, Any] = {v: {} for v in COST_VARIANTS}
    costs: dict[str, Any] = {v: {} for v in COST_VARIANTS}
    costs["ratios"] = {}
    for rows, cols in params.cost_shapes:
        label = f"{rows}x{cols}"
        x = torch.randn(rows, cols, generator=ctx.generator).to(ctx.device).requires_grad_()
        g = torch.randn(rows, cols, generator=ctx.generator).to(ctx.device)
        fns = {v: _variant_fn(v, ctx.disable_patterns) for v in COST_VARIANTS}
        steps = {v: _fwd_bwd(fn, x, g) for v, fn in fns.items()}
        # interleaved rounds, so that drifting machine load hits every variant alike
        times = race(steps, rounds=params.cost_repeat, warmup=params.cost_warmup,
                     device=ctx.device, rotate=False).wall
        for v, fn in fns.items():
            mem = measure_memory(steps[v], device=ctx.device)
            summary[v][label] = {"graph_nodes": count_graph_nodes(fn(x)),
                                 "saved_tensor_bytes": mem.saved_tensor_bytes}
            ts = sorted(times[v])
            costs[v][label] = {"time_median_s": ts[len(ts) // 2], "time_min_s": ts[0],
                               "peak_bytes": mem.peak_bytes}
        med = {v: costs[v][label]["time_median_s"] for v in COST_VARIANTS}
        costs.setdefault("ratio_rounds", {})[label] = {
            "blocked_over_unblocked": [b / u for b, u in zip(times[BLOCKED],
                                                             times[UNBLOCKED])]}
        costs["ratios"][label] = {f"{a}_over_{b}": med[a] / med[b] for a, b in (
            (BLOCKED, "torch"), (BLOCKED, UNBLOCKED), (UNBLOCKED, "torch"),
            ("fused", "torch"))}
    return summary, costs
