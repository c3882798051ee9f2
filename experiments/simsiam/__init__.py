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

Without the block the collapse is not a jump but a steady shrinking of the output's spread,
and how far it has gone depends on how far SGD has travelled: on these digits the spread after
training tracks ``lr × SGD steps`` (over seeds 0-5: 0.01 to 0.27 at 40, 0.01 to 0.07 at 80
to 120, at most 0.03 at 160). Hence the learning rate 0.4, which is not the paper's
``0.05 · batch_size / 256`` (that rule was set for a ResNet on ImageNet, thousands of updates an
epoch; ten updates make an epoch of the digits): QUICK's 40 epochs are 400 updates, and
with it the collapse is as clear as the paper's. Below ``lr × steps`` of
:data:`MIN_TRAVEL` the predictions on the loss and the collapse are left as measurements.

Reference:
    X. Chen, K. He. Exploring simple Siamese representation learning. CVPR 2021,
    https://arxiv.org/abs/2011.10566 (ImageNet linear accuracy 67.7 % with the stop-gradient,
    0.1 % without)
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
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
from toolkit.lab import (
    ExperimentParams,
    Finding,
    Headline,
    RunContext,
    RunResults,
    Story,
    fmt,
)
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
               "classes (Chen & He 2021, Figure 2). On 8×8 digits the collapse is as clear "
               "once SGD has run long enough (lr × steps ≥ 100), but a cosine k-NN vote on "
               "the collapsed output stays above chance: the findings say why",
)


class Params(ExperimentParams):
    epochs: int = Field(100, ge=1, le=100_000, description="training epochs of each variant")
    batch_size: int = Field(128, ge=2, description="digits per SGD step (two views each)")
    lr: float = Field(0.4, gt=0.0, description="SGD learning rate (momentum 0.9); the "
                      "collapse without the block needs lr × SGD steps ≥ 100")
    weight_decay: float = Field(1e-4, ge=0.0, description="SGD weight decay (paper: 1e-4)")
    hidden: int = Field(128, ge=1, description="width of the encoder")
    dim: int = Field(64, ge=2, description="output dimension d of the projector")
    pred_hidden: int = Field(16, ge=1, description="bottleneck of the predictor")
    k: int = Field(5, ge=1, description="neighbours of the k-NN vote")
    test_fraction: float = Field(0.25, gt=0.0, lt=1.0, description="held-out share of digits")


QUICK: dict[str, Any] = {"epochs": 40}

#: The least ``lr × SGD steps`` (summed step sizes, momentum 0.9) at which the trivial minimum
#: is reached here: over seeds 0-5 the unblocked spread std·√d was at most 0.055 at 100 and
#: 0.028 at 160, but up to 0.27 at 40 (still falling). With less training the predictions
#: on the loss and the collapse are measurements.
MIN_TRAVEL = 100.0


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
    steps = params.epochs * (len(train.X) // params.batch_size)  # last short batch dropped
    ctx.summary(blocked=runs[BLOCKED]["summary"], unblocked=runs[UNBLOCKED]["summary"],
                pixels={"knn_accuracy": pixels}, dim=params.dim, sgd_steps=steps)
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
#: The verdict's lines for std·√d: collapsed at or below the first, spread at or above the second.
COLLAPSED, SPREAD = 0.1, 0.5


def too_short(run: RunResults) -> str:
    """Why the run trained too little for the collapse predictions ("" when it did not)."""
    lr, steps = run.params.get("lr"), run.summary.get("sgd_steps")
    if lr is None or steps is None:  # a run from before the steps were recorded
        return ""
    travel = lr * steps
    if travel >= MIN_TRAVEL:
        return ""
    return (f"lr × SGD steps is {fmt(travel)}, below the {fmt(MIN_TRAVEL)} that the collapse "
            f"takes on these digits (the spread shrinks steadily with training, not at once).")


def _judged(holds: Callable[..., bool], *values: float | None) -> bool | None:
    """``holds(*values)``, or ``None`` (nothing to judge) when a variant diverged and left
    a number out."""
    return None if any(v is None for v in values) else holds(*values)


def findings(run: RunResults) -> list[Finding]:
    """Five sentences with their numbers and verdicts (the thresholds, fixed before the runs:
    loss ≤ −0.95 unblocked only; std·√d ≤ 0.1 unblocked and ≥ 0.5 blocked; k-NN ≥ 0.8
    blocked). The k-NN accuracy without the block is a measurement: see its sentence."""
    s = run.summary
    b, u, px = s[BLOCKED], s[UNBLOCKED], s["pixels"]["knn_accuracy"]
    seconds = run.costs.get("seconds_per_epoch", {})
    outside = too_short(run)
    out = [
        Finding("Without the block the loss goes to its minimum −1, the value of a constant "
                "output: it reaches {u_loss} against {b_loss} with the block.",
                _judged(lambda u_loss, b_loss: u_loss <= -0.95 < b_loss,
                        u["final_loss"], b["final_loss"]), basis=PAPER,
                values={"u_loss": u["final_loss"], "b_loss": b["final_loss"]}, outside=outside),
        Finding("Without the block the output collapses toward one direction: the std of the "
                "l2-normalised output times √d is {u_std} (1 for an isotropic output, 0 for a "
                "collapsed one; collapse is read as ≤ 0.1) against {b_std} with it (spread "
                "kept: ≥ 0.5).",
                _judged(lambda u_std, b_std: u_std <= COLLAPSED and b_std >= SPREAD,
                        u["output_std_sqrt_d"], b["output_std_sqrt_d"]),
                basis=PAPER, outside=outside,
                values={"u_std": u["output_std_sqrt_d"], "b_std": b["output_std_sqrt_d"]},
                headline=Headline("std of z/‖z‖ × √d", blocked="b_std", unblocked="u_std",
                                  thresholds=(COLLAPSED, SPREAD), log=True,
                                  reading="without the block the output collapses")),
        Finding("5-NN accuracy on held-out digits with the learned output: {b_knn} with the "
                "block (raw pixels: {px}).",
                _judged(lambda b_knn: b_knn >= 0.8, b["knn_accuracy"]),
                basis="Chen & He (2021), Figure 2 (right): with stop-gradient the k-NN "
                      "accuracy of the representation rises during training",
                values={"b_knn": b["knn_accuracy"], "px": px},
                outside=outside),  # it rises with training: a short run has not risen yet
        Finding("Without the block the same vote reaches {u_knn} on the output "
                "(std·√d {u_std}), and {u_enc} on the encoder's features (blocked {b_enc}). Not "
                "a prediction: a cosine vote depends only on the order of the similarities, "
                "which a spread shrunk around one direction keeps, so the vote falls to chance "
                "only when the outputs become equal to float precision; the paper's 0.1 % "
                "linear accuracy without the block comes after some 10⁵ updates of ImageNet, "
                "not a few hundred of the digits.",
                None, values={"u_knn": u["knn_accuracy"], "u_std": u["output_std_sqrt_d"],
                              "u_enc": u["knn_accuracy_encoder"],
                              "b_enc": b["knn_accuracy_encoder"]}),
    ]
    if seconds:
        out.append(Finding("An epoch takes {b:s} blocked and {u:s} unblocked on this machine "
                           "(one training each, not interleaved).", None, "cost",
                           values={"b": seconds.get(BLOCKED), "u": seconds.get(UNBLOCKED)}))
    return out


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def _finals(run: RunResults, variant: str, key: str) -> list[float]:
    """``key`` of ``variant`` at the end of training, one per seed (diverged seeds left out)."""
    return [v for r in run.replicates if (v := r.summary[variant][key]) is not None]


def _spread(values: list[float]) -> str:
    """One number, or ``mean [min, max]`` over the seeds."""
    if not values:
        return "n/a"
    mean, lo, hi = fmt(float(np.mean(values))), fmt(min(values)), fmt(max(values))
    return mean if lo == hi else f"{mean} [{lo}, {hi}]"


def figures(run: RunResults) -> dict[str, Any]:
    """The collapse per epoch, and the k-NN accuracies next to the pixel baseline; the
    captions quote the run's final numbers."""
    several = len(run.replicates) > 1
    final = {(v, key): _finals(run, v, key) for v in (BLOCKED, UNBLOCKED)
             for key in ("output_std_sqrt_d", "final_loss", "knn_accuracy")}
    u_std = final[UNBLOCKED, "output_std_sqrt_d"]
    u_loss = final[UNBLOCKED, "final_loss"]
    below = bool(u_std) and max(u_std) <= COLLAPSED
    near = bool(u_loss) and max(u_loss) <= -0.95
    over = " (mean [range] over the seeds)" if several else ""
    text = {key: _spread(values) for key, values in final.items()}
    return {
        "collapse": (_collapse_figure(run),
                     f"Without the stop-gradient the output's spread (left, log scale: 1 for an "
                     f"isotropic output, 0 for a constant one) ends at "
                     f"{text[UNBLOCKED, 'output_std_sqrt_d']}, "
                     f"{'under' if below else 'not everywhere under'} the collapse line "
                     f"{fmt(COLLAPSED)}, while the loss (right) ends at "
                     f"{text[UNBLOCKED, 'final_loss']}"
                     f"{', near its minimum −1' if near else ' (minimum −1)'}; with the block "
                     f"the spread ends at {text[BLOCKED, 'output_std_sqrt_d']} and the loss at "
                     f"{text[BLOCKED, 'final_loss']}{over}."),
        "knn": (_knn_figure(run),
                f"Nearest-neighbour accuracy of the held-out digits with the learned output "
                f"and with the encoder's features; the learned output gives "
                f"{text[BLOCKED, 'knn_accuracy']} blocked and {text[UNBLOCKED, 'knn_accuracy']} "
                f"unblocked. The dotted line is the accuracy on raw pixels; chance is one in ten"
                f"{' (bars and numbers: the mean over seeds; whiskers and brackets: the range)' if several else ''}."),
    }


def _collapse_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import step_axes, subplots, variant_curves

    fig, axes = subplots(1, 2, figsize=(9.0, 3.5))
    for ax, key, title in zip(axes, ("test/output_std_sqrt_d", "train/loss"),
                              ("spread of the output: std of z/‖z‖ × √d",
                               "SimSiam loss (minimum −1)")):
        variant_curves(ax, run, key)
        step_axes(ax, title)
    axes[0].set_yscale("log")  # the collapse spans decades: 1 down to 0.01 and below
    axes[0].axhline(1.0, label="isotropic output", **variant_style("reference"))
    for i, line in enumerate((SPREAD, COLLAPSED)):  # the verdict's lines
        axes[0].axhline(line, color="0.6", lw=1.0, ls="-.",
                        label=f"verdict lines {fmt(SPREAD)}, {fmt(COLLAPSED)}" if i == 0 else None)
    axes[0].set_ylabel("std × √d")
    axes[1].set_ylabel("loss")
    place_legend(axes[0], outside="right")  # the curves fill every corner
    return fig


def _knn_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import subplots, variant_bars

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
    place_legend(ax, outside="right")  # the bars fill every corner
    return fig

