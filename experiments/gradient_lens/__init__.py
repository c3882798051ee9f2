"""See the cut: the gradient-flow lens on two training steps that need one.

Two missing cuts that public bug reports keep showing, each written once with a named block and
run with and without it (``ctx.compare``), then examined with the lens
(``gradient_flow``, ``assert_no_gradient``, ``draw_gradient_graph``):

- **DQN target** (block ``gradient_lens.target``): the TD loss
  ``L = mean smooth_l1(Q(s, a), r + γ (1 − done) max_a' Q_target(s', a'))`` (Mnih et al. 2015)
  treats the bootstrap target as a label. The target network is a submodule of the agent and
  the update runs over ``agent.parameters()``, as in many code bases (an optimizer skips the
  parameters whose ``.grad`` is ``None``). With the cut the target network receives no gradient
  and stays frozen; without it, it receives gradient and trains.
- **GAN discriminator step** (block ``gradient_lens.fake``): the discriminator loss
  ``−log D(x) − log(1 − D(G(z)))`` (Goodfellow et al. 2014) treats the generator's sample as
  data. Without the cut ``backward`` also runs through the generator, which costs time and
  memory and fills the generator's ``.grad`` in a step that must not touch it.

References:
    Mnih et al. (2015), Human-level control through deep reinforcement learning, Nature 518,
    https://doi.org/10.1038/nature14236
    Goodfellow et al. (2014), Generative adversarial nets, NeurIPS,
    https://arxiv.org/abs/1406.2661
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable
from typing import Any

import torch
from pydantic import Field
from torch import nn
from torch.nn import functional as F

from toolkit import (
    GradientLeakError,
    as_constant,
    assert_no_gradient,
    disable_blocks,
    draw_gradient_graph,
    gradient_flow,
    gradient_graph,
    trace_cuts,
)
from toolkit.lab import (
    ExperimentParams,
    Finding,
    Headline,
    RunContext,
    RunResults,
    Story,
    TimeRatio,
)
from toolkit.lab.measure import count_graph_nodes, measure_memory, race
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = ("the gradient-flow lens: a DQN target and a GAN discriminator step, with and "
               "without the cut")

# The bootstrap target is a regression label: the target network must receive no gradient.
TARGET_BLOCK = "gradient_lens.target"
# The generator's sample is the discriminator's data: the D step must not reach the generator.
FAKE_BLOCK = "gradient_lens.fake"
STORY = Story(
    compares="two everyday training steps, a DQN TD loss with a target network and a GAN "
             "discriminator step, with their cuts named and switched off, seen through the lens",
    block=f"{TARGET_BLOCK}: target = r + γ max Q_target(s'); "
          f"{FAKE_BLOCK}: D(stop_gradient(G(z)))",
    prediction="with the cuts the target network and the generator receive no gradient; "
               "without them gradient leaks into both (a silent bug), while the network being "
               "trained gets exactly the same gradient; the leak adds graph nodes and bytes "
               "saved for backward (its time is measured, not predicted)",
)


class Params(ExperimentParams):
    obs_dim: int = Field(4, ge=1, description="DQN: observation size")
    n_actions: int = Field(2, ge=2, description="DQN: number of actions")
    q_hidden: int = Field(64, ge=1, description="DQN: width of the Q network's two hidden layers")
    batch: int = Field(64, ge=1, description="DQN: transitions per TD batch")
    gamma: float = Field(0.99, ge=0.0, lt=1.0, description="DQN: discount factor")
    td_steps: int = Field(50, ge=1, le=100_000, description="DQN: SGD steps on agent.parameters()")
    lr: float = Field(0.01, gt=0.0, description="DQN: SGD learning rate")
    latent_dim: int = Field(16, ge=1, description="GAN: size of the generator's noise z")
    data_dim: int = Field(2, ge=1, description="GAN: size of a data point")
    gan_hidden: int = Field(128, ge=1, description="GAN: width of both networks' hidden layers")
    gen_layers: int = Field(3, ge=1, description="GAN: hidden layers of the generator")
    gan_batch: int = Field(256, ge=1, description="GAN: real and fake samples per step")
    rounds: int = Field(15, ge=1, description="interleaved timing rounds per comparison")


QUICK: dict[str, Any] = {"q_hidden": 16, "td_steps": 20, "gan_hidden": 32, "gan_batch": 64,
                         "rounds": 9}


# --- data -----------------------------------------------------------------------------------------


def make_data(params: Params, ctx: RunContext) -> dict[str, torch.Tensor]:
    """Random transitions, and real GAN data on a ring of 8 Gaussians (σ = 0.05), plus noise z."""
    g, kw = ctx.generator, {"dtype": ctx.dtype}
    n, m = params.batch, params.gan_batch
    angle = torch.randint(0, 8, (m,), generator=g) * (2 * math.pi / 8)
    ring = torch.stack([angle.cos(), angle.sin()], 1).to(ctx.dtype)
    real = torch.zeros(m, params.data_dim, **kw)
    real[:, :2] = ring[:, :params.data_dim]
    real += 0.05 * torch.randn(m, params.data_dim, generator=g, **kw)
    data = {"s": torch.randn(n, params.obs_dim, generator=g, **kw),
            "a": torch.randint(0, params.n_actions, (n,), generator=g),
            "r": torch.randn(n, generator=g, **kw),
            "s2": torch.randn(n, params.obs_dim, generator=g, **kw),
            "done": (torch.rand(n, generator=g) < 0.1).to(ctx.dtype),
            "real": real, "z": torch.randn(m, params.latent_dim, generator=g, **kw)}
    return {k: v.to(ctx.device) for k, v in data.items()}


# --- the two training steps, each with its cut ----------------------------------------------------


class Agent(nn.Module):
    """A Q network and its target copy, in one module (so ``agent.parameters()`` holds both)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.online = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU(),
                                    nn.Linear(hidden, n_actions))
        self.target = copy.deepcopy(self.online)


def td_loss(agent: Agent, batch: dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
    """Smooth-L1 TD error of ``Q(s, a)`` against ``r + γ (1 − done) max_a' Q_target(s', a')``."""
    q = agent.online(batch["s"]).gather(1, batch["a"][:, None]).squeeze(1)
    next_v = as_constant(lambda: agent.target(batch["s2"]).max(1).values, name=TARGET_BLOCK)
    return F.smooth_l1_loss(q, batch["r"] + gamma * (1 - batch["done"]) * next_v)


def sgd_step(module: nn.Module, lr: float) -> None:
    """``θ ← θ − lr ∇θ`` for every parameter with a ``.grad``, as ``torch.optim.SGD`` does."""
    with torch.no_grad():
        for p in module.parameters():
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)


def make_gan(params: Params) -> tuple[nn.Module, nn.Module]:
    widths = [params.latent_dim, *[params.gan_hidden] * params.gen_layers]
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.ReLU()]
    generator = nn.Sequential(*layers, nn.Linear(widths[-1], params.data_dim))
    discriminator = nn.Sequential(nn.Linear(params.data_dim, params.gan_hidden), nn.LeakyReLU(0.2),
                                  nn.Linear(params.gan_hidden, params.gan_hidden),
                                  nn.LeakyReLU(0.2), nn.Linear(params.gan_hidden, 1))
    return generator, discriminator


def d_loss(generator: nn.Module, discriminator: nn.Module, real: torch.Tensor,
           z: torch.Tensor) -> torch.Tensor:
    """The discriminator's loss ``−log D(x) − log(1 − D(G(z)))``, the fake blocked."""
    fake = as_constant(generator, z, name=FAKE_BLOCK)
    real_logits, fake_logits = discriminator(real), discriminator(fake)
    return (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
            + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))


# --- the comparison: each step with its cut and without it, then the lens on it -------------------


def run(params: Params, ctx: RunContext) -> None:
    data = make_data(params, ctx)
    # one initialization, copied into each variant and examined by the lens as it is
    agent = Agent(params.obs_dim, params.n_actions, params.q_hidden).to(ctx.device, ctx.dtype)
    generator, discriminator = (m.to(ctx.device, ctx.dtype) for m in make_gan(params))
    td = ctx.compare(lambda: td_variant(params, copy.deepcopy(agent), data))
    gan = ctx.compare(lambda: gan_variant(ctx, *copy.deepcopy((generator, discriminator)), data))
    for variant, out in td.items():
        for row in out.pop("rows"):
            ctx.log(row["step"], **{f"{variant}/{k}": v for k, v in row.items() if k != "step"})
    memory = {v: gan[v].pop("memory") for v in gan}
    messages = {f"{case}_{v}": runs[v].pop("message") for case, runs in
                (("td", td), ("gan", gan)) for v in runs}
    ctx.summary(blocked={"td": td[BLOCKED], "gan": gan[BLOCKED]},
                unblocked={"td": td[UNBLOCKED], "gan": gan[UNBLOCKED]},
                # transitions whose target bootstraps (done = 0): those reach the target network
                td_bootstrapped=int((data["done"] == 0).sum()))
    flows, costs = examine(params, ctx, {
        "td": (lambda: td_loss(agent, data, params.gamma),
               {"online": agent.online, "target": agent.target}),
        "gan": (lambda: d_loss(generator, discriminator, data["real"], data["z"]),
                {"discriminator": discriminator, "generator": generator})})
    ctx.summary(flow={k: v["rows"] for k, v in flows.items()})
    ctx.save_artifact("lens", {"flow": flows, "assert_messages": messages})
    saved = {v: memory[v]["saved_tensor_bytes"] for v in memory}
    peak = {v: memory[v]["peak_bytes"] for v in memory}
    costs["gan"]["memory"] = {
        **memory, "saved_bytes_ratio_unblocked_over_blocked": saved[UNBLOCKED] / max(saved[BLOCKED], 1),
        "peak_bytes_ratio_unblocked_over_blocked": peak[UNBLOCKED] / max(peak[BLOCKED], 1)}
    ctx.costs(**costs)


def td_variant(params: Params, agent: Agent, data: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Gradient reach and leak check of one TD loss, then ``td_steps`` SGD steps on ``agent``."""
    loss = td_loss(agent, data, params.gamma)
    out = {**_received(loss, {"online": agent.online, "target": agent.target}),
           **_leak_check(loss, agent.target, "target",
                         "the target network must receive no gradient"),
           "graph_nodes": count_graph_nodes(loss)}
    start = torch.cat([p.detach().reshape(-1) for p in agent.target.parameters()]).clone()
    rows = []
    for step in range(params.td_steps + 1):
        agent.zero_grad(set_to_none=True)
        loss = td_loss(agent, data, params.gamma)
        now = torch.cat([p.detach().reshape(-1) for p in agent.target.parameters()])
        rows.append({"step": step, "td/loss": loss.item(), "td/target_drift":
                     float((now - start).norm())})
        if step < params.td_steps:
            loss.backward()
            sgd_step(agent, params.lr)
    out["rows"] = rows
    out["final_target_drift"] = rows[-1]["td/target_drift"]
    return out


def gan_variant(ctx: RunContext, generator: nn.Module, discriminator: nn.Module,
                data: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Gradient reach, leak check and memory of one discriminator step (``loss.backward()``)."""
    loss = d_loss(generator, discriminator, data["real"], data["z"])
    out = {**_received(loss, {"discriminator": discriminator, "generator": generator}),
           **_leak_check(loss, generator, "generator",
                         "the discriminator step must not train the generator"),
           "graph_nodes": count_graph_nodes(loss)}

    def step() -> None:
        d_loss(generator, discriminator, data["real"], data["z"]).backward()

    memory = measure_memory(step, device=ctx.device)
    out["generator_grads_filled"] = sum(p.grad is not None for p in generator.parameters())
    out["memory"] = memory.to_dict()
    return out


def examine(params: Params, ctx: RunContext,
            cases: dict[str, tuple[Callable[[], torch.Tensor], dict[str, nn.Module]]]
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The lens on each case's initial networks (``gradient_flow`` never touches ``.grad``)
    and its backward graph, cuts traced; the step's time with and without the cut, and the
    lens's time against the step's. Returns the flows and the costs, by case."""
    flows, costs = {}, {}
    for case, (loss_fn, groups) in cases.items():
        flow = gradient_flow(loss_fn, groups)
        flows[case] = flow.to_dict()
        flows[case]["markdown"] = flow.to_markdown()
        with trace_cuts():
            graph = gradient_graph(loss_fn(), groups)
        ctx.save_artifact(f"graph_{case}", graph.to_dict())

        def step(loss_fn: Callable[[], torch.Tensor] = loss_fn,
                 groups: dict[str, nn.Module] = groups) -> None:
            loss_fn().backward()
            for module in groups.values():
                module.zero_grad(set_to_none=True)

        costs[case] = _timing(step, ctx, params.rounds)
        lens = race({"step": step, "gradient_flow": lambda f=loss_fn, g=groups: gradient_flow(f, g)},
                    rounds=params.rounds, device=ctx.device)
        costs[case]["gradient_flow_over_step"] = lens.ratio("gradient_flow", "step").median
    return flows, costs


def _received(loss: torch.Tensor, modules: dict[str, nn.Module]) -> dict[str, Any]:
    """Which parameters a gradient reaches (autograd.grad, .grad untouched) and the norms."""
    named = {f"{g}.{k}": p for g, m in modules.items() for k, p in m.named_parameters()}
    grads = torch.autograd.grad(loss, list(named.values()), allow_unused=True, retain_graph=True)
    out: dict[str, Any] = {"received": [k for k, g in zip(named, grads) if g is not None]}
    for group in modules:
        gs = [g for k, g in zip(named, grads) if k.startswith(group + ".") and g is not None]
        out[f"{group}_params_with_gradient"] = len(gs)
        out[f"{group}_grad_norm"] = float(torch.cat([g.reshape(-1) for g in gs]).norm()) if gs \
            else 0.0
    return out


def _leak_check(loss: torch.Tensor, module: nn.Module, name: str, why: str) -> dict[str, Any]:
    try:
        assert_no_gradient(loss, {name: module}, why=why)
    except GradientLeakError as err:
        name, path = min(err.paths.items(), key=lambda item: len(item[1]))
        return {"assert_no_gradient": "failed", "leaking": sorted(err.paths),
                "shortest_leak": f"{name}: {' -> '.join(path)}", "message": str(err)}
    return {"assert_no_gradient": "passed", "leaking": [], "shortest_leak": "",
            "message": ""}


def _timing(step: Callable[[], Any], ctx: RunContext, rounds: int) -> dict[str, Any]:
    """Interleaved rounds of the step with its blocks and without them (per-round ratios)."""
    def unblocked() -> Any:
        with disable_blocks(*ctx.disable_patterns):
            return step()

    result = race({BLOCKED: step, UNBLOCKED: unblocked}, rounds=rounds, device=ctx.device)
    ratio = result.ratio(UNBLOCKED, BLOCKED)
    return {"blocked_seconds": result.median(BLOCKED),
            "unblocked_seconds": result.median(UNBLOCKED),
            "time_ratio_unblocked_over_blocked": ratio.median, "rounds": rounds,
            "time_ratio_rounds": list(ratio.rounds)}


# --- findings -------------------------------------------------------------------------------------


CUT = ("the definition of the cut: stop_gradient passes no gradient, so nothing behind it is "
       "on a backward path from the loss")


def findings(run: RunResults) -> list[Finding]:
    """Five or six sentences with their numbers and verdicts, from ``summary.json`` and
    ``costs.json``."""
    s, c = run.summary, run.costs
    tb, tu = s[BLOCKED]["td"], s[UNBLOCKED]["td"]
    gb, gu = s[BLOCKED]["gan"], s[UNBLOCKED]["gan"]
    n_target = tu["target_params_with_gradient"]
    n_steps = int(run.metric(f"{BLOCKED}/td/target_drift")[0][-1])
    online = next(r for r in s["flow"]["td"] if r["group"] == "online")
    disc = next(r for r in s["flow"]["gan"] if r["group"] == "discriminator")
    # the target enters the loss as γ (1 − done) max Q_target: without the cut it leaks a
    # gradient only when γ > 0 and some transition bootstraps, else a path of zeros
    gamma, bootstrapped = run.params.get("gamma", 0.99), s.get("td_bootstrapped", 1)
    leaks = gamma > 0 and bootstrapped > 0
    moved = tu["final_target_drift"] > 0 if leaks else \
        tu["final_target_drift"] == 0 == tu["target_grad_norm"]
    out = [
        Finding("DQN target: with the cut {nb} of {n} target-network parameters received "
                "gradient and {steps} SGD steps on agent.parameters() moved the target network "
                "by {drift_b}; without it all {n} received gradient (norm {norm_u}) and the "
                "target drifted by {drift_u}" + ("." if leaks else
                                                 f" (γ (1 − done) = 0 for every transition, "
                                                 f"γ = {gamma:g}: a path that carries zeros)."),
                tb["target_params_with_gradient"] == 0 and tb["final_target_drift"] == 0
                and n_target > 0 and moved, basis=CUT,
                values={"nb": tb["target_params_with_gradient"], "n": n_target,
                        "steps": n_steps, "drift_b": tb["final_target_drift"],
                        "norm_u": tu["target_grad_norm"], "drift_u": tu["final_target_drift"]},
                headline=Headline("target network's drift after the SGD steps (parameter "
                                  "distance)", blocked="drift_b", unblocked="drift_u",
                                  thresholds=(0.0,),
                                  reading="with the cut the target network never moves: "
                                          "drift 0")),
        Finding("assert_no_gradient(loss, target network) {b} with the cut and {u} without it, "
                "naming {n_leak} of {n} parameters (shortest path: {path}).",
                tb["assert_no_gradient"] == "passed" and tu["assert_no_gradient"] == "failed"
                and len(tu["leaking"]) == n_target, basis=CUT,
                values={"b": tb["assert_no_gradient"], "u": tu["assert_no_gradient"],
                        "n_leak": len(tu["leaking"]), "n": n_target,
                        "path": tu["shortest_leak"].partition(": ")[2]},
                seed_independent=True),
        Finding("The cuts change who receives gradient, not the gradient of the network being "
                "trained: cosine {online:4} (online network) and {disc:4} (discriminator) "
                "between blocked and unblocked.",
                min(online["cosine"], disc["cosine"]) > 1 - 1e-6,
                basis="the chain rule: the trained network's own paths to the loss do not pass "
                      "through the cut",
                values={"online": online["cosine"], "disc": disc["cosine"]}),
        Finding("GAN discriminator step: without the cut gradient reached {n_u} generator "
                "parameters (norm {norm_u}) and backward filled {filled_u} generator .grad "
                "tensors; with it {n_b} and {filled_b}.",
                gb["generator_params_with_gradient"] == 0 and gb["generator_grads_filled"] == 0
                and gu["generator_params_with_gradient"] > 0, basis=CUT,
                values={"n_u": gu["generator_params_with_gradient"],
                        "norm_u": gu["generator_grad_norm"],
                        "filled_u": gu["generator_grads_filled"],
                        "n_b": gb["generator_params_with_gradient"],
                        "filled_b": gb["generator_grads_filled"]}),
    ]
    return out + _cost_findings(gb, gu, c.get("gan", {}))


def _cost_findings(gb: dict[str, Any], gu: dict[str, Any], gan_cost: dict[str, Any]
                   ) -> list[Finding]:
    """What the GAN step's leak costs: bytes and graph nodes (deterministic), and time."""
    out = []
    memory = gan_cost.get("memory", {})
    if gan_cost and memory:
        saved = (memory[UNBLOCKED]["saved_tensor_bytes"],
                 memory[BLOCKED]["saved_tensor_bytes"])
        out.append(Finding(
            "The leak makes the discriminator step save {ratio}x the bytes for backward "
            "({b:B} vs {u:B}), with {nu} autograd nodes instead of {nb}.",
            saved[0] > saved[1] and gu["graph_nodes"] > gb["graph_nodes"], "cost",
            basis="reverse mode records every operation between the loss and the parameters: "
                  "without the cut, the generator's too",
            values={"ratio": saved[0] / max(saved[1], 1), "b": saved[1], "u": saved[0],
                    "nu": gu["graph_nodes"], "nb": gb["graph_nodes"]},
            seed_independent=True))
    if gan_cost.get("time_ratio_rounds"):
        out.append(Finding(
            "Without the cut the discriminator step takes {timing} its blocked time ({b:s} "
            "blocked; median of per-round ratios over interleaved rounds); theory fixes no "
            "size for this extra backward work.",
            topic="cost", values={"b": gan_cost["blocked_seconds"]},
            timing=TimeRatio(tuple(gan_cost["time_ratio_rounds"]))))
    return out


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """Each case's backward graph with its cut marked, drawn from the saved graph data."""
    captions = {
        "td": "The DQN TD loss: behind the cut (dashed) lies the whole target network, which "
              "receives no gradient with the block.",
        "gan": "The GAN discriminator step: behind the cut on the fake samples lies the whole "
               "generator, greyed: with the block no gradient reaches it.",
    }
    return {f"graph_{case}": (draw_gradient_graph(run.artifact(f"graph_{case}"), title=title),
                              captions[case])
            for case, title in (("td", f"DQN TD loss: the cut {TARGET_BLOCK!r}"),
                                ("gan", f"GAN discriminator step: the cut {FAKE_BLOCK!r}"))}

