"""Adversarial training with and without the ``adversarial.examples`` block.

Standard training, PGD adversarial training (Madry et al. 2018) and Fast-FGSM with a random
start (Wong, Rice, Kolter 2020) are run on the same data from the same initialisation, each
adversarial method twice from the same random state: with the block (the adversarial examples are
constants for the parameter update, Danskin's theorem) and inside ``disable_blocks`` (the
parameter gradient also flows through the unrolled attack, ``create_graph=True``).

Measured: accuracy on held-out data (clean, FGSM, PGD-``eval_steps``, PGD with restarts); time
per epoch and memory of one training step, blocked vs unblocked, and memory against the number of
PGD steps; the cosine between the parameter gradients with and without the block for L∞ sign
steps (the extra term is zero almost everywhere: ``sign`` has zero derivative) and for L2 steps
(it is not); figures: accuracy curves, memory vs steps, adversarial digits, and for the 2-D moons
the decision boundaries with adversarial points.

References:
    Madry et al. (2018), https://arxiv.org/abs/1706.06083 ; Wong, Rice, Kolter (2020),
    https://arxiv.org/abs/2001.03994 ; Goodfellow, Shlens, Szegedy (2015),
    https://arxiv.org/abs/1412.6572
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from typing import Any, Literal

import torch
from pydantic import Field, field_validator
from torch import nn

from toolkit.algorithms.adversarial import (
    adversarial_training,
    eval_mode,
    evaluate_robustness,
    fgsm,
    pgd,
    predict,
)
from toolkit.algorithms.divergence import check_finite
from toolkit.lab import (
    ExperimentParams,
    Finding,
    Headline,
    RunContext,
    RunResults,
    Story,
    TimeRatio,
)
from toolkit.lab.data import Dataset, digits, train_test_split, two_moons
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary
from .probes import gradient_comparison, memory_vs_steps, save_graph

DESCRIPTION = "adversarial training (PGD-AT, Fast-FGSM): adversarial examples as constants or not"
STORY = Story(
    compares="standard training, PGD adversarial training and Fast-FGSM on the same data from "
             "the same network, each attacked method with the adversarial examples blocked and "
             "not blocked from the same random state",
    block="adversarial.examples: x_adv = stop_gradient(attack(model, x))",
    prediction="by Danskin's theorem the inner maximiser is a constant for the parameter "
               "update: with L∞ sign steps the gradient through the unrolled attack is zero "
               "(sign has zero derivative), so blocked and unblocked train the same model while "
               "the unblocked one's graph grows with the attack's steps and, by the cheap "
               "gradient principle, its step takes longer; with L2 steps the extra gradient is "
               "not zero",
)

METHODS = ["standard", "pgd", "fgsm_rs"]


class Params(ExperimentParams):
    dataset: Literal["digits", "moons"] = Field(
        "digits", description="digits (8×8, pixels in [0, 1]) or the 2-D two moons (unbounded)")
    methods: list[Literal["standard", "pgd", "fgsm_rs", "fgsm"]] = Field(
        default_factory=lambda: list(METHODS),
        description="training procedures; the attacked ones run blocked and unblocked")
    hidden: list[int] = Field(default_factory=lambda: [256, 256],
                              description="hidden layer widths of the ReLU MLP")
    eps: float = Field(0.1, gt=0, description="L∞ radius of training and evaluation attacks")
    alpha: float = Field(0.02, gt=0, description="PGD-AT step size (Fast-FGSM uses 1.25 eps)")
    steps: int = Field(10, ge=1, description="PGD-AT steps")
    epochs: int = Field(30, ge=1, le=10_000, description="training epochs")
    lr: float = Field(1e-3, gt=0, description="Adam learning rate")
    batch_size: int = Field(64, ge=1, description="training minibatch size")
    n_train: int | None = Field(None, ge=10, description="use only this many training examples")
    test_fraction: float = Field(0.25, gt=0, lt=1, description="held-out fraction (stratified)")
    n_samples: int = Field(1000, ge=20, description="moons: number of points")
    noise: float = Field(0.1, ge=0, description="moons: noise of make_moons")
    eval_steps: int = Field(40, ge=1, description="steps of the evaluation PGD (alpha 2.5 eps/steps)")
    eval_restarts: int = Field(5, ge=1, description="restarts of the restarted evaluation PGD")
    n_eval: int | None = Field(None, ge=1, description="evaluate on this many held-out examples")
    check_size: int = Field(256, ge=1, description="held-out examples of the per-epoch PGD check")
    memory_steps: list[int] = Field(default_factory=lambda: [1, 5, 10, 20],
                                    description="PGD steps at which a training step's memory is measured")
    memory_batch: int = Field(128, ge=1, description="batch size of the memory/time probes")
    timing_repeat: int = Field(3, ge=1, description="repetitions of each timed gradient")
    timing_rounds: int = Field(
        9, ge=1, description="interleaved rounds timing a training step blocked and unblocked "
                             "(6 or more give a 95 % interval of the median ratio)")
    grad_batch: int = Field(128, ge=1, description="batch of the blocked/unblocked gradient comparison")
    l2_eps: float = Field(1.0, gt=0, description="L2 radius of the gradient comparison's L2 attack")
    n_examples: int = Field(10, ge=1, le=64, description="digits shown in the adversarial grid")

    @field_validator("methods")
    @classmethod
    def _distinct(cls, methods: list[str]) -> list[str]:
        if not methods or len(set(methods)) != len(methods):
            raise ValueError(f"methods must be distinct and non-empty, got {methods}")
        return methods

    @field_validator("hidden", "memory_steps")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values) or not values:
            raise ValueError(f"must be a non-empty list of ints >= 1, got {values}")
        return values


QUICK: dict[str, Any] = {
    "hidden": [64, 64], "epochs": 4, "n_train": 800, "batch_size": 32, "lr": 3e-3,
    "eval_steps": 10, "eval_restarts": 2, "n_eval": 200, "check_size": 100,
    "memory_steps": [1, 5, 10], "memory_batch": 64, "timing_repeat": 1, "grad_batch": 64,
    "n_examples": 8,
}


# --- data and model -------------------------------------------------------------------------------


def load_data(params: Params, ctx: RunContext) -> tuple[Dataset, Dataset, tuple[float, float] | None]:
    """Train/test split (stratified, seeded), on ``ctx.device``; bounds of the inputs."""
    if params.dataset == "digits":
        data, bounds = digits(ctx.dtype), (0.0, 1.0)
    else:
        data, bounds = two_moons(params.n_samples, noise=params.noise, seed=ctx.seed,
                                 dtype=ctx.dtype), None
    train, test = train_test_split(data, params.test_fraction, seed=ctx.seed)
    if params.n_train is not None:
        train = Dataset(train.X[:params.n_train], train.y[:params.n_train])
    if params.n_eval is not None:
        test = Dataset(test.X[:params.n_eval], test.y[:params.n_eval])
    move = lambda d: Dataset(d.X.to(ctx.device), d.y.to(ctx.device))  # noqa: E731
    return move(train), move(test), bounds


def make_mlp(sizes: list[int], *, seed: int, device: torch.device, dtype: torch.dtype
             ) -> nn.Sequential:
    """ReLU MLP with PyTorch's default ``nn.Linear`` initialisation, ``U(−1/√fan_in,
    1/√fan_in)``, drawn from ``seed``: every method starts from the same network."""
    g = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        linear = nn.Linear(n_in, n_out, dtype=dtype)
        bound = 1.0 / math.sqrt(n_in)
        with torch.no_grad():
            linear.weight.copy_(torch.rand(n_out, n_in, generator=g, dtype=dtype) * 2 * bound - bound)
            linear.bias.copy_(torch.rand(n_out, generator=g, dtype=dtype) * 2 * bound - bound)
        layers.append(linear)
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(device)


def eval_attacks(params: Params, bounds: tuple[float, float] | None, seed: int) -> dict[str, Any]:
    """FGSM, PGD-k and PGD-k with restarts (α = 2.5 ε / k), each with its own seeded generator."""
    eps, k = params.eps, params.eval_steps
    pgd_k = functools.partial(pgd, eps=eps, alpha=2.5 * eps / k, steps=k, bounds=bounds)
    return {"fgsm": functools.partial(fgsm, eps=eps, bounds=bounds),
            f"pgd{k}": functools.partial(pgd_k, generator=torch.Generator().manual_seed(seed)),
            f"pgd{k}_restarts": functools.partial(pgd_k, restarts=params.eval_restarts,
                                                  generator=torch.Generator().manual_seed(seed + 1))}


# --- the comparison: each method trained blocked and unblocked, then probed -----------------------


def run(params: Params, ctx: RunContext) -> None:
    train, test, bounds = load_data(params, ctx)
    ctx.summary(data={"n_train": len(train.y), "n_eval": len(test.y), "updates": params.epochs
                      * math.ceil(len(train.y) / params.batch_size)})
    sizes = [train.X.shape[1], *params.hidden, int(torch.cat([train.y, test.y]).max()) + 1]
    models = train_methods(params, ctx, sizes, train, test, bounds)
    init = make_mlp(sizes, seed=ctx.seed, device=ctx.device, dtype=ctx.dtype)
    memory_vs_steps(params, ctx, init, train, bounds)
    trained = models.get(f"blocked/{'pgd' if 'pgd' in params.methods else params.methods[0]}")
    save_graph(params, ctx, init, test, bounds)
    gradient_comparison(params, ctx, {"init": init} | (  # not a model that diverged
        {"trained": trained} if trained is not None else {}), test, bounds)
    blocked = {k.split("/", 1)[1]: m for k, m in models.items() if k.startswith("blocked/")}
    if params.dataset == "digits":
        _examples(params, ctx, blocked, test, bounds)
    else:  # the two moons: decision boundaries
        _boundaries(params, ctx, blocked, train, test, bounds)


def train_methods(params: Params, ctx: RunContext, sizes: list[int], train: Dataset,
                  test: Dataset, bounds: tuple[float, float] | None) -> dict[str, nn.Module]:
    """Each method from the same network (an attacked one blocked and unblocked), logged as it
    ends and scored on held-out data; the models still finite, by ``"<variant>/<method>"``."""
    results: dict[str, dict[str, Any]] = {BLOCKED: {}, UNBLOCKED: {}}
    models: dict[str, nn.Module] = {}
    seconds: dict[str, dict[str, float]] = {BLOCKED: {}, UNBLOCKED: {}}

    def record(variant: str, out: tuple[nn.Module, Any], method: str) -> None:
        model, history = out  # logged as soon as the variant has trained
        for i, epoch in enumerate(history.epoch):
            ctx.log(epoch + 1, **{f"{variant}/{method}/{key}": getattr(history, key)[i]
                                  for key in ("loss", "train_acc", "clean_acc", "robust_acc")})
        entry: dict[str, Any] = {}
        if history.divergence is not None:  # stopped at a non-finite value: where
            entry["diverged_at"] = history.divergence.as_dict()
            if check_finite(model.state_dict()) is not None:  # nothing left to measure
                results[variant][method] = entry
                return
        accuracy = evaluate_robustness(model, test, eval_attacks(params, bounds, ctx.seed))
        results[variant][method] = {**accuracy, "overfitting_epoch": history.overfitting_epoch,
                                    "final_check_robust_acc": history.robust_acc[-1]
                                    if history.robust_acc else None, **entry}
        if history.seconds:
            seconds[variant][method] = statistics.median(history.seconds)
        models[f"{variant}/{method}"] = model

    for method in params.methods:
        fit = functools.partial(_train, method, params, ctx, sizes, train, test, bounds)
        if method == "standard":  # no attack, no block: one run stands for both variants
            record(BLOCKED, fit(), method)
        else:
            ctx.compare(fit, on_result=functools.partial(record, method=method))
    ctx.summary(**results)
    ctx.costs(seconds_per_epoch=seconds, epoch_time_ratio_unblocked_over_blocked={
        m: seconds[UNBLOCKED][m] / seconds[BLOCKED][m] for m in seconds[UNBLOCKED]
        if m in seconds[BLOCKED]})
    if "standard" in params.methods:
        ctx.summary(notes={"standard": "no attack and no block: one run, listed under blocked"})
    return models


def _train(method: str, params: Params, ctx: RunContext, sizes: list[int], train: Dataset,
           test: Dataset, bounds: tuple[float, float] | None) -> tuple[nn.Module, Any]:
    model = make_mlp(sizes, seed=ctx.seed, device=ctx.device, dtype=ctx.dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=params.lr)
    bar = ctx.progress(total=params.epochs, desc=method)
    try:
        history = adversarial_training(
            model, train, optimizer, method=method, epochs=params.epochs, eps=params.eps,
            alpha=params.alpha if method == "pgd" else None,
            steps=params.steps if method == "pgd" else None,
            batch_size=params.batch_size, bounds=bounds,
            check_data=(test.X[:params.check_size], test.y[:params.check_size]),
            generator=ctx.generator, callback=lambda epoch, record: bar.update())
    finally:
        bar.close()
    return model, history


def _examples(params: Params, ctx: RunContext, models: dict[str, nn.Module], test: Dataset,
              bounds: tuple[float, float] | None) -> None:
    """First held-out example of each class (then more), attacked by PGD against each blocked
    model (``models``: method → model)."""
    n = min(params.n_examples, len(test.y))
    firsts = [int(torch.nonzero(test.y == c)[0]) for c in torch.unique(test.y).tolist()]
    rest = [i for i in range(len(test.y)) if i not in firsts]
    idx = torch.tensor((firsts + rest)[:n])
    x, y = test.X[idx], test.y[idx]
    out: dict[str, Any] = {"x": x, "y": y}
    for method, model in models.items():  # PGD-k with a generator of its own for each model
        x_adv = eval_attacks(params, bounds, ctx.seed)[f"pgd{params.eval_steps}"](model, x, y)
        out[f"adv_{method}"] = x_adv
        out[f"pred_clean_{method}"] = predict(model, x)
        out[f"pred_adv_{method}"] = predict(model, x_adv)
    ctx.save_artifact("examples", {k: v.cpu() for k, v in out.items()})


def _boundaries(params: Params, ctx: RunContext, models: dict[str, nn.Module], train: Dataset,
                test: Dataset, bounds: tuple[float, float] | None) -> None:
    """Class-1 probability on a grid and PGD points against each blocked model (``models``:
    method → model; 2-D data)."""
    X = torch.cat([train.X, test.X])
    lo, hi = X.min(0).values - 0.5, X.max(0).values + 0.5
    gx = torch.linspace(float(lo[0]), float(hi[0]), 120, dtype=ctx.dtype, device=ctx.device)
    gy = torch.linspace(float(lo[1]), float(hi[1]), 100, dtype=ctx.dtype, device=ctx.device)
    grid = torch.stack(torch.meshgrid(gx, gy, indexing="xy"), -1).reshape(-1, 2)
    x, y = test.X[:100], test.y[:100]
    out: dict[str, Any] = {"gx": gx, "gy": gy, "x": x, "y": y, "train_x": train.X,
                           "train_y": train.y}
    for method, model in models.items():
        with torch.no_grad(), eval_mode(model):
            out[f"prob_{method}"] = torch.softmax(model(grid), -1)[:, 1].reshape(len(gy), len(gx))
        out[f"adv_{method}"] = eval_attacks(params, bounds, ctx.seed)[f"pgd{params.eval_steps}"](
            model, x, y)
    ctx.save_artifact("boundary", {k: v.cpu() for k, v in out.items()})


# --- findings -------------------------------------------------------------------------------------

LABELS = {"standard": "standard", "pgd": "PGD-AT", "fgsm_rs": "Fast-FGSM (RS)", "fgsm": "FGSM-AT"}


DANSKIN = ("Danskin's theorem: the inner maximiser is a constant of the parameter gradient "
           "(Madry et al. 2018, §2); an L∞ step uses sign(∇), whose derivative is zero")
MADRY = "Madry et al. (2018): training on PGD examples raises the accuracy under PGD"

#: Fewest parameter updates and held-out examples for which "PGD-AT beats standard training
#: under PGD" is a prediction. Madry et al. state it of models trained near the saddle point;
#: with QUICK's sizes (100 updates, 200 held-out digits) the gain was 0.055 to 0.29 over seeds
#: 0-29, with 2 epochs (50 updates) it ranged from −0.14 to 0.13 over seeds 0-4.
MIN_UPDATES = 100
MIN_EVAL = 100
#: Smallest relative gradient difference read as "not zero": rounding of one gradient is
#: ~1e-7 in float32 (the L∞ case is exactly 0), the L2 term ~1e-1 at QUICK's sizes.
NONZERO = 1e-5


def _madry_outside(run: RunResults) -> str:
    """Why this run lies outside the range of Madry et al.'s prediction ("" inside)."""
    p, data = run.params, run.summary.get("data", {})
    eps, alpha, steps = p.get("eps", 0.1), p.get("alpha", 0.02), p.get("steps", 10)
    if alpha * steps < eps:
        return (f"PGD-AT's attack moves at most α·steps = {alpha * steps:.3g} < ε = {eps:.3g}, "
                f"so it trains against a weaker adversary than the ε-ball's")
    if data and data["updates"] < MIN_UPDATES:
        return (f"{data['updates']} parameter updates (epochs × batches) are too few for a model "
                f"near the saddle point Madry et al. describe; the prediction covers "
                f"{MIN_UPDATES} or more")
    if data and data["n_eval"] < MIN_EVAL:
        return (f"{data['n_eval']} held-out examples measure an accuracy only to about "
                f"±{1 / math.sqrt(data['n_eval']):.2g}; the prediction covers {MIN_EVAL} or more")
    return ""


def findings(run: RunResults) -> list[Finding]:
    """Four to five sentences with their numbers and verdicts."""
    s = run.summary
    b, u = s[BLOCKED], s[UNBLOCKED]
    k = run.params.get("eval_steps", 40)
    pgd_key = f"pgd{k}"
    out = []
    if "pgd" in b and pgd_key in b["pgd"]:
        at = b["pgd"]
        line = ("PGD adversarial training reaches {at_clean} clean accuracy and {at_pgd} under "
                f"PGD-{k} (ε = {run.params.get('eps')})")
        values: dict[str, Any] = {"at_clean": at["clean"], "at_pgd": at[pgd_key]}
        ok: bool | None = None  # without standard training there is nothing to beat
        if pgd_key in b.get("standard", {}):
            std = b["standard"]
            line += ", where standard training has {std_clean} clean and {std_pgd} under the attack"
            values.update(std_clean=std["clean"], std_pgd=std[pgd_key])
            ok = at[pgd_key] > std[pgd_key]
        out.append(Finding(line + ".", ok, basis=MADRY if ok is not None else "", values=values,
                           outside=_madry_outside(run) if ok is not None else ""))
    out += _danskin_findings(run, b, u, pgd_key)
    return out + _cost_findings(s.get("memory"), run.costs, headline=not any(
        f.headline for f in out))


def _danskin_findings(run: RunResults, b: dict[str, Any], u: dict[str, Any], pgd_key: str
                      ) -> list[Finding]:
    """Blocked and unblocked train the same model with L∞ steps (the headline, when a method
    was attacked), and the gradient through the attack: zero for L∞ steps, not for L2."""
    out = []
    attacked = [m for m in u if m in b]
    if attacked:
        trained = [m for m in attacked if pgd_key in b[m] and pgd_key in u[m]]
        # a method that diverged in one variant only did not train the same model
        same = len(trained) == len(attacked) and all(
            b[m]["clean"] == u[m]["clean"] and b[m][pgd_key] == u[m][pgd_key] for m in trained)
        values: dict[str, Any] = {}
        for m in trained:
            values.update({f"{m}_bc": b[m]["clean"], f"{m}_bp": b[m][pgd_key],
                           f"{m}_uc": u[m]["clean"], f"{m}_up": u[m][pgd_key]})
        head = trained[0] if trained else None
        out.append(Finding(
            "With L∞ sign steps the block changes nothing the model learns: "
            + "; ".join(f"{LABELS[m]} reaches {{{m}_bc}} / {{{m}_bp}} (clean / PGD) blocked "
                        f"and {{{m}_uc}} / {{{m}_up}} unblocked" for m in trained)
            + "".join(f"; {LABELS[m]} diverged" for m in attacked if m not in trained) + ".",
            same, basis=DANSKIN, values=values,
            headline=Headline(f"{LABELS[head]} accuracy under PGD-{pgd_key[3:]}",
                              blocked=f"{head}_bp", unblocked=f"{head}_up",
                              reading="identical: PGD's sign() passes no gradient through "
                                      "the attack")
            if head is not None else None))
    grads = run.summary.get("gradients", {})
    model = "trained" if "trained/linf" in grads else "init"
    if f"{model}/linf" in grads and f"{model}/l2" in grads:
        li, l2 = grads[f"{model}/linf"], grads[f"{model}/l2"]
        out.append(Finding(
            "The gradient through the unrolled attack is exactly zero for L∞ sign steps "
            "(relative difference {li_rel}, cosine {li_cos:4}) and not for L2 steps (relative "
            "difference {l2_rel}, cosine {l2_cos:4})" + (" at the initial network" if model ==
                                                          "init" else "") + ".",
            li["rel_diff"] < 1e-9 and l2["rel_diff"] > NONZERO,
            basis="sign(∇) has zero derivative almost everywhere; the L2 step ∇/‖∇‖ does not",
            values={"li_rel": li["rel_diff"], "li_cos": li["cosine"], "l2_rel": l2["rel_diff"],
                    "l2_cos": l2["cosine"]}))
    return out


def _cost_findings(memory: dict[str, Any] | None, c: dict[str, Any], *, headline: bool = False
                   ) -> list[Finding]:
    """The graph's growth with the attack's steps (deterministic; the headline when no method
    was attacked), and the step's time."""
    if not memory:
        return []
    steps, gb, gu = memory["steps"], memory[BLOCKED]["graph_nodes"], \
        memory[UNBLOCKED]["graph_nodes"]
    lo, hi = steps.index(min(steps)), steps.index(max(steps))
    line = ("Without the block the training loss's graph grows with the attack: {gu0} → "
            "{gu1} autograd nodes from {s0} to {s1} PGD steps, against a constant {gb} "
            "with it")
    values = {"gu0": gu[lo], "gu1": gu[hi], "s0": steps[lo], "s1": steps[hi], "gb": gb[hi]}
    saved = c.get("memory", {})
    if saved:
        line += "; bytes saved for backward (peak) {sb:B} blocked vs {su:B}"
        values.update(sb=saved[BLOCKED]["saved_tensor_peak_bytes"][hi],
                      su=saved[UNBLOCKED]["saved_tensor_peak_bytes"][hi])
    out = [Finding(line + ".", gu[hi] > gu[lo] and len(set(gb)) == 1, "cost",
                   basis="reverse mode records every operation between the loss and the "
                         "parameters: without the cut, each attack step's forward and backward",
                   values=values, seed_independent=True,
                   outside="" if steps[hi] > steps[lo] else
                   f"memory_steps has one step count ({steps[hi]}): growth needs two",
                   headline=Headline("autograd nodes behind the training loss",
                                     reading="without the cut the graph grows with every "
                                             "attack step",
                                     blocked="gb", unblocked="gu1", log=True)
                   if headline else None)]
    rounds = c.get("step_time_ratio_rounds")
    if rounds:
        out.append(Finding(
            f"A PGD-AT training step with {steps[hi]} attack steps takes {{timing}} "
            "the blocked time without the block (median of per-round ratios, interleaved "
            "rounds).", topic="cost",
            basis="the cheap gradient principle: reverse mode costs a few times the forward "
                  "work it differentiates (Griewank & Walther 2008, §4), and without the cut "
                  "that work includes the attack",
            timing=TimeRatio(tuple(rounds[hi]), "above")))
    return out


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """Accuracy curves, memory vs PGD steps, adversarial digits or moons decision boundaries
    (drawn by ``drawing.py``); the backward graph."""
    from toolkit import draw_gradient_graph

    from .drawing import accuracy_figure, boundary_figure, examples_figure, memory_figure

    p, artifacts = run.params, run.artifact_names()
    check = f"check batch of {p.get('check_size', 256)} held-out digits"
    figs: dict[str, Any] = {"accuracy_curves": (
        accuracy_figure(run, check),
        f"Clean and PGD-10 accuracy per epoch of each training method (marker), blocked "
        f"(solid blue) and unblocked (dashed vermillion, open markers), scored during "
        f"training on a {check} with one PGD start; the findings score the final models "
        f"on {p.get('n_eval') or 'all'} held-out digits with PGD-{p.get('eval_steps')} and "
        f"{p.get('eval_restarts')} restarts, so their numbers are lower. With L∞ steps "
        f"blocked and unblocked coincide: the legend says 'identical'.")}
    if run.summary.get("memory"):
        figs["memory_vs_steps"] = (
            memory_figure(run),
            "What one PGD-AT training step costs as the attack gets more steps: peak live "
            "tensor memory, bytes saved for backward alive at once, and autograd nodes "
            "behind the training loss. Without the block they grow with every step; with "
            "it they stay flat.")
    if "examples" in artifacts:
        figs["adversarial_examples"] = (examples_figure(run), (
            "Held-out digits (top) and their PGD versions against each model, with the model's "
            "prediction ('fooled' where the attack changes it)."))
    if "boundary" in artifacts:
        figs["decision_boundary"] = (
            boundary_figure(run),
            "Decision boundaries (black) on the two moons with the held-out points (dots, "
            "coloured by class) and their PGD versions (crosses, joined to their points).")
    if "graph" in artifacts:
        figs["graph"] = (draw_gradient_graph(run.artifact("graph")),
                         "The backward graph of one PGD-AT loss with the cut "
                         "adversarial.examples marked: behind it lies the unrolled attack.")
    return figs
