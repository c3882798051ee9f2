"""What one PGD-AT training step costs with and without the block, and how its gradient
changes: memory, graph size and time against the attack's steps, the backward graph of one loss,
and the parameter gradients blocked vs unblocked for L∞ and L2 steps. ``run`` in
``__init__.py`` calls them after training.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from toolkit import compare_gradients, disable_blocks, gradient_graph
from toolkit.algorithms.adversarial import pgd
from toolkit.lab import RunContext
from toolkit.lab.data import Dataset
from toolkit.lab.measure import count_graph_nodes, measure_memory, race
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

if TYPE_CHECKING:
    from . import Params


def _adversarial_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float,
                      alpha: float, steps: int, bounds: tuple[float, float] | None, seed: int,
                      norm: str = "linf") -> torch.Tensor:
    """The PGD-AT loss of one batch: cross-entropy at PGD examples (``steps`` steps of size
    ``alpha`` in the ``norm`` ball of radius ``eps``, the random start drawn from ``seed``)."""
    x_adv = pgd(model, x, y, eps, alpha, steps, norm=norm, bounds=bounds,
                generator=torch.Generator().manual_seed(seed))
    return F.cross_entropy(model(x_adv), y)


def memory_vs_steps(params: Params, ctx: RunContext, model: nn.Module, train: Dataset,
                    bounds: tuple[float, float] | None) -> None:
    """Memory, graph size and time of one training step against the attack's steps."""
    x, y = train.X[:params.memory_batch], train.y[:params.memory_batch]
    byte_keys = ("peak_bytes", "saved_tensor_bytes", "saved_tensor_peak_bytes")
    memory: dict[str, dict[str, list[int]]] = {
        v: {k: [] for k in (*byte_keys, "graph_nodes")} for v in (BLOCKED, UNBLOCKED)}
    timing: dict[str, list[float]] = {BLOCKED: [], UNBLOCKED: []}
    rounds: list[list[float]] = []
    for steps in params.memory_steps:
        loss = functools.partial(_adversarial_loss, model, x, y, params.eps, params.alpha, steps,
                                 bounds, ctx.seed)

        def step(loss: Any = loss) -> float:  # forward and backward, the attack included
            grads = torch.autograd.grad(loss(), list(model.parameters()))
            return float(sum(g.square().sum() for g in grads))

        def unblocked_step(step: Any = step) -> float:
            with disable_blocks(*ctx.disable_patterns):
                return step()

        # interleaved rounds: drifting machine load hits both variants alike (many rounds at
        # the largest step count, which the findings use; three elsewhere, for the table)
        timed = race({BLOCKED: step, UNBLOCKED: unblocked_step},
                     rounds=params.timing_rounds if steps == max(params.memory_steps) else 3,
                     device=ctx.device)
        rounds.append(list(timed.ratio(UNBLOCKED, BLOCKED).rounds))
        for variant, blocks in ((BLOCKED, contextlib.nullcontext()),
                                (UNBLOCKED, disable_blocks(*ctx.disable_patterns))):
            with blocks:
                stats = measure_memory(step, device=ctx.device)
                # size of the graph the final backward walks: flat when blocked
                nodes = count_graph_nodes(loss())
            timing[variant].append(timed.median(variant))
            for key in byte_keys:
                memory[variant][key].append(getattr(stats, key))
            memory[variant]["graph_nodes"].append(nodes)
            # bytes are machine-dependent (costs.json); the graph size is deterministic
            ctx.log(steps, **{f"{variant}/memory/graph_nodes": nodes})
    ctx.summary(memory={"steps": params.memory_steps, "batch": int(x.shape[0]),
                        **{v: {"graph_nodes": memory[v]["graph_nodes"]} for v in memory}})
    ctx.costs(memory={"steps": params.memory_steps,
                      **{v: {k: memory[v][k] for k in byte_keys} for v in memory}},
              step_seconds={"steps": params.memory_steps, **timing},
              step_time_ratio_unblocked_over_blocked=[
                  u / b for u, b in zip(timing[UNBLOCKED], timing[BLOCKED])],
              step_time_ratio_rounds=rounds)


def save_graph(params: Params, ctx: RunContext, model: nn.Module, test: Dataset,
               bounds: tuple[float, float] | None) -> None:
    """The backward graph of one PGD-AT loss (two attack steps, four examples), cut marked."""
    loss = functools.partial(_adversarial_loss, model, test.X[:4], test.y[:4], params.eps,
                             2.5 * params.eps / 2, 2, bounds, ctx.seed)
    groups = {f"layer {i}": layer for i, layer in enumerate(model) if isinstance(layer, nn.Linear)}
    ctx.save_artifact("graph", gradient_graph(loss, groups).to_dict())


def gradient_comparison(params: Params, ctx: RunContext, models: dict[str, nn.Module],
                        test: Dataset, bounds: tuple[float, float] | None) -> None:
    """Parameter gradients of the adversarial loss with and without the block, L∞ and L2."""
    x, y = test.X[:params.grad_batch], test.y[:params.grad_batch]
    summary: dict[str, dict[str, Any]] = {}
    costs: dict[str, dict[str, float]] = {}
    for name, model in models.items():
        for norm, eps in (("linf", params.eps), ("l2", params.l2_eps)):
            loss = functools.partial(_adversarial_loss, model, x, y, eps, 2.5 * eps / params.steps,
                                     params.steps, bounds, ctx.seed, norm)
            parameters = dict(model.named_parameters())
            cmp = compare_gradients(loss, parameters, disable=ctx.disable_patterns)
            summary[f"{name}/{norm}"] = {key: getattr(cmp.overall, key) for key in (
                "cosine", "rel_diff", "norm_blocked", "norm_unblocked")}
            grad = lambda loss=loss, p=parameters: torch.autograd.grad(  # noqa: E731
                loss(), list(p.values()))
            blocked = race({"grad": grad}, rounds=params.timing_repeat,
                           device=ctx.device).median("grad")
            with disable_blocks(*ctx.disable_patterns):
                unblocked = race({"grad": grad}, rounds=params.timing_repeat,
                                 device=ctx.device).median("grad")
            costs[f"{name}/{norm}"] = {"blocked_seconds": blocked, "unblocked_seconds": unblocked,
                                       "ratio": unblocked / blocked}
            ctx.log(0, **{f"unblocked/grad/cosine_{name}_{norm}": cmp.overall.cosine})
    ctx.summary(gradients=summary)
    ctx.costs(gradients=costs)
