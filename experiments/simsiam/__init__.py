"""SimSiam on the digits with and without the stop-gradient on the target branch.

Two augmented views of each batch of scikit-learn's 8×8 digits (small shifts, masked pixels,
noise: :class:`toolkit.algorithms.simsiam.Augment`) pass through the same MLP encoder and
projector (with BatchNorm) and a bottleneck predictor; the loss is Chen & He's symmetrised
negative cosine ``½ D(p₁, sg(z₂)) + ½ D(p₂, sg(z₁))``:

- **blocked**: the other view's projection is a constant target (the paper's method);
- **unblocked** (``disable_blocks("simsiam.*")``): both branches move toward each other.

Both variants start from the same network and see the same views. Measured on the held-out
digits: the per-channel std of the l2-normalised projector output times √d (1 for isotropic
Gaussian outputs, 0 for a collapsed one; Chen & He, Figure 2), and the accuracy of a 5-nearest-
neighbour vote (cosine) on the learned output and on the encoder's features, next to the same
vote on the raw pixels.

Reference:
    X. Chen, K. He. Exploring simple Siamese representation learning. CVPR 2021,
    https://arxiv.org/abs/2011.10566 (ImageNet linear accuracy 67.7 % with the stop-gradient,
    0.1 % without)
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np
import torch
from pydantic import Field

from toolkit.algorithms.divergence import check_finite
from toolkit.algorithms.simsiam import (
    BLOCK,
    Augment,
    SimSiam,
    knn_accuracy,
    output_std,
    train_simsiam,
)
from toolkit.lab import ExperimentParams, Finding, RunContext, RunResults, Story
from toolkit.lab.data import Dataset, digits, train_test_split
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import place_legend, variant_style

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = "SimSiam on the digits: the target branch behind stop_gradient vs trained too"
STORY = Story(
    compares="SimSiam trained on augmented digits with the other view's projection blocked "
             "(a constant target) and not blocked, from the same network and the same views",
    block=f"{BLOCK}: L = ½ D(p₁, stop_gradient(z₂)) + ½ D(p₂, stop_gradient(z₁))",
    prediction="with the block the output keeps its spread (std of z/‖z‖ near 1/√d) and "
               "nearest neighbours find the digit's class; without it the loss reaches −1, the "
               "output collapses to one direction (std → 0) and the embedding loses its "
               "classes (Chen & He 2021, Figure 2). On 8×8 digits in a short training the "
               "collapse is partial and the classes survive: the findings say where",
)


class Params(ExperimentParams):
    epochs: int = Field(100, ge=1, le=100_000, description="training epochs of each variant")
    batch_size: int = Field(128, ge=2, description="digits per SGD step (two views each)")
    lr: float = Field(0.1, gt=0.0, description="SGD learning rate (momentum 0.9)")
    weight_decay: float = Field(1e-4, ge=0.0, description="SGD weight decay (paper: 1e-4)")
    hidden: int = Field(128, ge=1, description="width of the encoder")
    dim: int = Field(64, ge=2, description="output dimension d of the projector")
    pred_hidden: int = Field(16, ge=1, description="bottleneck of the predictor")
    k: int = Field(5, ge=1, description="neighbours of the k-NN vote")
    test_fraction: float = Field(0.25, gt=0.0, lt=1.0, description="held-out share of digits")


QUICK: dict[str, Any] = {"epochs": 40}


# --- data -----------------------------------------------------------------------------------------


def load_data(params: Params, ctx: RunContext) -> tuple[Dataset, Dataset]:
    """The digits split into training and held-out parts (stratified, seeded); the pixels on
    ``ctx.device``, the labels where they are."""
    train, test = train_test_split(digits(ctx.dtype), params.test_fraction, seed=ctx.seed)
    return Dataset(train.X.to(ctx.device), train.y), Dataset(test.X.to(ctx.device), test.y)


# --- the comparison -------------------------------------------------------------------------------


def run(params: Params, ctx: RunContext) -> None:
    train, test = load_data(params, ctx)
    torch.manual_seed(ctx.seed)  # the networks' initialisation (shared by both variants)
    start = SimSiam(train.X.shape[1], hidden=params.hidden, dim=params.dim,
                    pred_hidden=params.pred_hidden, device=ctx.device, dtype=ctx.dtype)
    runs = ctx.compare(lambda: fit(copy.deepcopy(start), params, ctx, train, test),
                       on_result=lambda variant, out: log(ctx, variant, out))
    pixels = knn_accuracy(train.X, train.y, test.X, test.y, k=params.k)
    ctx.summary(blocked=runs[BLOCKED]["summary"], unblocked=runs[UNBLOCKED]["summary"],
                pixels={"knn_accuracy": pixels}, dim=params.dim)
    ctx.costs(seconds_per_epoch={v: out["seconds_per_epoch"] for v, out in runs.items()})


def fit(model: SimSiam, params: Params, ctx: RunContext, train: Dataset, test: Dataset
        ) -> dict[str, Any]:
    """Train ``model`` (the loss and the output's spread on the held-out digits after every
    epoch), then measure it; rows, summary and seconds per epoch."""
    sqrt_d = math.sqrt(params.dim)
    rows: list[dict[str, float]] = []

    def after_epoch(epoch: int, row: dict[str, float]) -> None:
        _, z_test = model.embed(test.X)
        rows.append({"loss": row["loss"], "output_std_sqrt_d": output_std(z_test) * sqrt_d})

    seconds = time.perf_counter()
    history = train_simsiam(model, train.X, epochs=params.epochs, batch_size=params.batch_size,
                            lr=params.lr, weight_decay=params.weight_decay, augment=Augment(),
                            generator=torch.Generator().manual_seed(ctx.seed),
                            callback=after_epoch)
    seconds = time.perf_counter() - seconds
    summary = {**measure(model, params, train, test),
               "final_loss": rows[-1]["loss"] if rows else None}
    if history.divergence is not None:  # stopped at a non-finite value: where
        summary["diverged_at"] = history.divergence.as_dict()
    return {"rows": rows, "summary": summary, "seconds_per_epoch": seconds / max(len(rows), 1)}


def measure(model: SimSiam, params: Params, train: Dataset, test: Dataset
            ) -> dict[str, float | None]:
    """The output's spread (std of z/‖z‖ × √d) and the k-NN accuracies of the output and of
    the encoder's features on the held-out digits (``None`` for a diverged model)."""
    if check_finite(model.state_dict()) is not None:  # diverged: nothing to measure
        return dict.fromkeys(("output_std_sqrt_d", "knn_accuracy", "knn_accuracy_encoder"))
    f_train, z_train = model.embed(train.X)
    f_test, z_test = model.embed(test.X)
    return {"output_std_sqrt_d": output_std(z_test) * math.sqrt(params.dim),
            "knn_accuracy": knn_accuracy(z_train, train.y, z_test, test.y, k=params.k),
            "knn_accuracy_encoder": knn_accuracy(f_train, train.y, f_test, test.y, k=params.k)}


def log(ctx: RunContext, variant: str, out: dict[str, Any]) -> None:
    """A variant's loss and output spread per epoch, logged as soon as it has trained."""
    for epoch, row in enumerate(out["rows"], start=1):
        ctx.log(epoch, **{f"{variant}/train/loss": row["loss"],
                          f"{variant}/test/output_std_sqrt_d": row["output_std_sqrt_d"]})


# --- findings -------------------------------------------------------------------------------------


PAPER = "Chen & He (2021), Figure 2: without stop-gradient the loss reaches −1 and the output collapses"


def findings(run: RunResults) -> list[Finding]:
    """Five sentences with their numbers and verdicts (the thresholds, fixed before the runs:
    std·√d >= 0.5 blocked and <= 0.1 unblocked; k-NN >= 0.8 blocked and <= 0.3 unblocked)."""
    s = run.summary
    b, u, px = s[BLOCKED], s[UNBLOCKED], s["pixels"]["knn_accuracy"]
    seconds = run.costs.get("seconds_per_epoch", {})
    out = [
        Finding("Without the block the loss goes to its minimum −1, the value of a constant "
                "output: it reaches {u_loss} against {b_loss} with the block.",
                u["final_loss"] <= -0.95 and b["final_loss"] > -0.95, basis=PAPER,
                values={"u_loss": u["final_loss"], "b_loss": b["final_loss"]}),
        Finding("Without the block the output collapses toward one direction: the std of the "
                "l2-normalised output times √d is {u_std} (1 for an isotropic output, 0 for a "
                "collapsed one; collapse is read as ≤ 0.1) against {b_std} with it.",
                u["output_std_sqrt_d"] <= 0.1 and b["output_std_sqrt_d"] >= 0.5, basis=PAPER,
                values={"u_std": u["output_std_sqrt_d"], "b_std": b["output_std_sqrt_d"]}),
        Finding("5-NN accuracy on held-out digits with the learned output: {b_knn} with the "
                "block (raw pixels: {px}).", b["knn_accuracy"] >= 0.8,
                basis="Chen & He (2021), Figure 2 (right): with stop-gradient the k-NN "
                      "accuracy of the representation rises during training",
                values={"b_knn": b["knn_accuracy"], "px": px}),
        Finding("Without the block the same vote reaches {u_knn}, where the paper has "
                "near-chance (≤ 0.3 here): the collapsed output keeps a small spread (std·√d "
                "{u_std}) whose direction still carries the class for a cosine vote; the "
                "encoder's features, kept spread by BatchNorm, give {u_enc} (blocked {b_enc}).",
                u["knn_accuracy"] <= 0.3,
                basis="Chen & He (2021), Figure 2 (right): without stop-gradient the k-NN "
                      "accuracy stays near chance",
                values={"u_knn": u["knn_accuracy"], "u_std": u["output_std_sqrt_d"],
                        "u_enc": u["knn_accuracy_encoder"], "b_enc": b["knn_accuracy_encoder"]}),
    ]
    if seconds:
        out.append(Finding("An epoch takes {b:s} blocked and {u:s} unblocked on this machine "
                           "(one training each, not interleaved).", None, "cost",
                           values={"b": seconds.get(BLOCKED), "u": seconds.get(UNBLOCKED)}))
    return out


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """The collapse per epoch, and the k-NN accuracies next to the pixel baseline."""
    return {
        "collapse": (_collapse_figure(run),
                     "Without the stop-gradient the output collapses: its spread (left, 1 for an "
                     "isotropic output, 0 for a constant one) falls toward 0 while the loss "
                     "(right) reaches its minimum −1; with the block the spread stays near 1."),
        "knn": (_knn_figure(run),
                "Nearest-neighbour accuracy of the held-out digits with the learned output and "
                "with the encoder's features, blocked and unblocked; the dotted line is the "
                "accuracy on raw pixels (with several seeds: the mean, and the range as "
                "whiskers)."),
    }


def _collapse_figure(run: RunResults) -> Any:
    from toolkit.lab.report.plots import step_axes, subplots, variant_curves

    fig, axes = subplots(1, 2, figsize=(9.0, 3.5))
    for ax, key, title in zip(axes, ("test/output_std_sqrt_d", "train/loss"),
                              ("spread of the output: std of z/‖z‖ × √d",
                               "SimSiam loss (minimum −1)")):
        variant_curves(ax, run, key)
        step_axes(ax, title)
    axes[0].axhline(1.0, label="isotropic output", **variant_style("reference"))
    axes[0].set_ylabel("std × √d")
    axes[1].set_ylabel("loss")
    place_legend(axes[0])
    return fig


def _knn_figure(run: RunResults) -> Any:
    from toolkit.lab.report.plots import subplots, variant_bars

    summaries = [r.summary for r in run.replicates]  # bars: mean over seeds, whiskers: range
    groups = {"learned output z": "knn_accuracy", "encoder features": "knn_accuracy_encoder"}
    fig, ax = subplots(figsize=(7.0, 3.4))
    bars = variant_bars(ax, list(groups), {
        v: [[s[v][key] for key in groups.values()] for s in summaries]
        for v in (BLOCKED, UNBLOCKED)})
    for container in bars.values():  # in the middle of the bars: off the baseline and whiskers
        ax.bar_label(container, labels=[f"{v:.3g}" for v in container.datavalues], fontsize=9,
                     color="white", label_type="center")
    ax.axhline(float(np.mean([s["pixels"]["knn_accuracy"] for s in summaries])),
               label="raw pixels", **variant_style("reference"))
    ax.set_ylabel("5-NN accuracy (held out)")
    ax.set_ylim(0, 1.05)
    place_legend(ax)
    return fig

