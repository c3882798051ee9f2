"""VQ-VAE on the digits with and without its three stop-gradients.

A small VQ-VAE (:mod:`toolkit.algorithms.vq_vae`: MLP encoder and decoder, each digit coded by
``n_latents`` vectors from a codebook of ``n_codes``) is trained on scikit-learn's 8×8 digits
with ``L = recon + ‖sg(z_e) − e‖² + β ‖z_e − sg(e)‖²``, β = 0.25, and ``z_q = z_e + sg(e − z_e)``:

- **blocked**: every cut in place (van den Oord et al. 2017);
- **unblocked**: the config's ``disable_blocks`` (default ``vq_vae.*``, all three cuts off);
- **one cut off at a time**: ``without_straight_through`` (``vq_vae.straight_through``, the
  algorithm's block: ``z_q = e`` and the encoder receives exactly zero reconstruction gradient),
  ``without_codebook`` (``vq_vae.codebook``: the codebook term also pulls the encoder) and
  ``without_commitment`` (``vq_vae.commitment``: the commitment term also moves the codes).

Every variant starts from the same network and codebook (codes set to encoder outputs of random
training digits) and sees the same batches. Reported: test reconstruction MSE, the reconstruction
gradient that reaches the encoder, and the codebook's perplexity (how many codes are in use).

Without the commitment cut alone the codes' gradient is exactly ``1 + β`` times the blocked one
(the commitment term becomes β times the codebook term as a function of the codes) and the
encoder's is unchanged; Adam divides each step by the gradient's running RMS, so that variant
is the blocked run with Adam's ε divided by ``1 + β``: its curves lie within rounding of the
blocked ones, not on them. The run measures the ratio on the initial model.

Reference:
    van den Oord, Vinyals & Kavukcuoglu (2017), Neural discrete representation learning,
    https://arxiv.org/abs/1711.00937
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import math
import time
from typing import Any

import torch
from pydantic import Field

from toolkit import disable_blocks
from toolkit.algorithms.divergence import check_finite
from toolkit.algorithms.vq_vae import (
    BLOCK,
    CODEBOOK_BLOCK,
    COMMITMENT_BLOCK,
    VQVAE,
    encoder_recon_grad_norm,
    perplexity,
    train_vq_vae,
)
from toolkit.lab import ExperimentParams, Finding, Headline, RunContext, RunResults, Story
from toolkit.lab.data import digits, train_test_split
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED
from toolkit.lab.style import note_identical, variant_style

from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = ("VQ-VAE on the digits: the straight-through, codebook and commitment "
               "stop-gradients, all in place, all off, and one at a time off")
STORY = Story(
    compares="a VQ-VAE trained on the digits with its stop-gradients in place, all off, and each "
             "one off alone, from the same initialisation and batches",
    block=f"{BLOCK}: z_q = z_e + stop_gradient(e − z_e) (also {CODEBOOK_BLOCK} and "
          f"{COMMITMENT_BLOCK} on the two auxiliary terms)",
    prediction="without the straight-through cut z_q = e and the encoder receives exactly zero "
               "reconstruction gradient (van den Oord et al. 2017); what that does to the "
               "reconstructions and the codebook is measured",
)
#: the further variants, each with one block off
ABLATIONS = {"without_straight_through": BLOCK, "without_codebook": CODEBOOK_BLOCK,
             "without_commitment": COMMITMENT_BLOCK}


class Params(ExperimentParams):
    n_latents: int = Field(4, ge=1, description="code vectors per digit")
    latent_dim: int = Field(8, ge=1, description="size of each code vector")
    n_codes: int = Field(32, ge=1, description="codebook size")
    hidden: int = Field(128, ge=1, description="width of the encoder's and decoder's hidden layer")
    epochs: int = Field(60, ge=1, le=100_000, description="training epochs of each variant")
    batch_size: int = Field(64, ge=1, description="digits per Adam step")
    lr: float = Field(2e-3, gt=0.0, description="Adam learning rate")
    beta: float = Field(0.25, ge=0.0, description="commitment weight β (paper: 0.25)")
    test_fraction: float = Field(0.25, gt=0.0, lt=1.0, description="held-out share of the digits")


QUICK: dict[str, Any] = {"epochs": 12}


# --- data -----------------------------------------------------------------------------------------


def load_data(params: Params, ctx: RunContext) -> tuple[torch.Tensor, torch.Tensor]:
    """Training and held-out digits (stratified, seeded split), on ``ctx.device``."""
    train, test = train_test_split(digits(ctx.dtype), params.test_fraction, seed=ctx.seed)
    return train.X.to(ctx.device), test.X.to(ctx.device)


# --- the comparison -------------------------------------------------------------------------------


def run(params: Params, ctx: RunContext) -> None:
    X, X_test = load_data(params, ctx)
    start = VQVAE(X.shape[1], n_latents=params.n_latents, latent_dim=params.latent_dim,
                  n_codes=params.n_codes, hidden=params.hidden, device=ctx.device,
                  dtype=ctx.dtype)
    start.init_codebook(X, generator=ctx.generator)
    # measured on a copy: the variants all start from ``start`` as it was made
    ctx.summary(commitment_gradients=commitment_gradients(copy.deepcopy(start), X, params.beta))

    def fit() -> dict[str, Any]:
        return train(copy.deepcopy(start), params, ctx, X, X_test)

    runs = ctx.compare(fit, on_result=lambda variant, out: log(ctx, variant, out))
    for name, block in ABLATIONS.items():
        with disable_blocks(block):
            runs[name] = fit()
        log(ctx, name, runs[name])
    mean_image = ((X_test - X.mean(0)) ** 2).mean().item()
    ctx.summary(**{v: out["summary"] for v, out in runs.items()},
                baseline={"mean_image_mse": mean_image},
                n_codes=params.n_codes)
    ctx.costs(seconds_per_epoch={v: out["seconds_per_epoch"] for v, out in runs.items()})
    ctx.save_artifact("examples", {"original": X_test[:8]} | {
        v: out["examples"] for v, out in runs.items()})


def train(model: VQVAE, params: Params, ctx: RunContext, X: torch.Tensor, X_test: torch.Tensor
          ) -> dict[str, Any]:
    """Train ``model`` (evaluated on the held-out digits after every epoch), then measure it:
    rows per epoch, summary, seconds per epoch and eight reconstructions."""
    rows: list[dict[str, float]] = []
    seconds = time.perf_counter()
    history = train_vq_vae(model, X, epochs=params.epochs, batch_size=params.batch_size,
                           lr=params.lr, beta=params.beta,
                           generator=torch.Generator().manual_seed(ctx.seed),
                           callback=lambda epoch, row: rows.append(
                               row | evaluate(model, params, X_test)))
    seconds = time.perf_counter() - seconds
    final = rows[-1] if rows else dict.fromkeys(("recon", "codebook", "commitment"))
    measured = evaluate(model, params, X_test)
    summary = {**measured, "train_recon": final["recon"],
               "codebook_loss": final["codebook"], "commitment_loss": final["commitment"],
               "encoder_recon_grad_norm": encoder_recon_grad_norm(model, X_test)
               if measured["recon_mse"] is not None else None}
    if history.divergence is not None:  # stopped at a non-finite value: where
        summary["diverged_at"] = history.divergence.as_dict()
    return {"rows": rows, "seconds_per_epoch": seconds / max(len(rows), 1),
            "summary": summary, "examples": model(X_test[:8]).x_hat}


def commitment_gradients(model: VQVAE, X: torch.Tensor, beta: float) -> dict[str, float]:
    """The training loss's gradient on the codes and on the encoder with the commitment cut
    and without it (``vq_vae.commitment`` disabled alone), on the digits ``X``.

    Returns ``codes_ratio``, the least-squares factor ``c`` in ``g_codes(no cut) ≈ c ·
    g_codes(cut)``, ``codes_residual``, ``‖g_no cut − c g_cut‖ / ‖g_no cut‖`` (0 when the two
    are parallel), and ``encoder_rel_diff``, the encoder's gradient's relative change."""
    params = [model.codebook, *model.encoder.parameters()]

    def grads() -> tuple[torch.Tensor, torch.Tensor]:
        gs = torch.autograd.grad(model(X).loss(beta), params)
        return gs[0].reshape(-1), torch.cat([g.reshape(-1) for g in gs[1:]])

    codes, encoder = grads()
    with disable_blocks(COMMITMENT_BLOCK):
        codes_free, encoder_free = grads()
    ratio = float(codes_free @ codes / (codes @ codes))
    return {"codes_ratio": ratio,
            "codes_residual": float((codes_free - ratio * codes).norm() / codes_free.norm()),
            "encoder_rel_diff": float((encoder_free - encoder).norm() / encoder.norm())}


def evaluate(model: VQVAE, params: Params, X_test: torch.Tensor) -> dict[str, float | None]:
    """Test reconstruction MSE, the codebook's perplexity and the codes in use (``None`` for
    a diverged model)."""
    if check_finite(model.state_dict()) is not None:  # diverged: nothing to measure
        return dict.fromkeys(("recon_mse", "perplexity", "codes_used"))
    with torch.no_grad():
        out = model(X_test)
    return {"recon_mse": out.recon.item(), "perplexity": perplexity(out.indices, params.n_codes),
            "codes_used": int(out.indices.unique().numel())}


def log(ctx: RunContext, variant: str, out: dict[str, Any]) -> None:
    """A variant's test MSE, training reconstruction loss and perplexity per epoch."""
    for epoch, row in enumerate(out["rows"], start=1):
        ctx.log(epoch, **{f"{variant}/test/recon_mse": row["recon_mse"],
                          f"{variant}/train/recon": row["recon"],
                          f"{variant}/codes/perplexity": row["perplexity"]})


# --- findings -------------------------------------------------------------------------------------


#: How close the measured ratio of the codes' gradients must come to 1 + β, and how parallel
#: the two gradients must be (relative): rounding of one loss's gradient, far from any change
#: the cut could make.
GRADIENT_TOL = 1e-4

STRAIGHT_THROUGH = ("the straight-through estimator (van den Oord et al. 2017, §3.2): without "
                    "it z_q = e(z_e) is piecewise constant in z_e")
ADAM_SCALE = ("without its cut the commitment term β‖z_e − e‖² is β times the codebook term as "
              "a function of the codes (van den Oord et al. 2017, eq. 3), so the codes' "
              "gradient is 1 + β times the blocked one and the encoder's is unchanged; Adam's "
              "step divides by the gradient's running RMS, so it is the same step with ε "
              "divided by 1 + β (Kingma & Ba 2015, §2.1)")


def findings(run: RunResults) -> list[Finding]:
    """Five or six sentences with their numbers and verdicts, from ``summary.json``,
    ``costs.json`` and the curves."""
    s = run.summary
    b, u, k = s[BLOCKED], s[UNBLOCKED], s["n_codes"]
    st, cb, cm = (s[name] for name in ABLATIONS)
    mean_image = s["baseline"]["mean_image_mse"]
    out = [_straight_through(run, b, u, st)]
    out.append(Finding(
        "Test reconstruction MSE {b_mse} with every block and {u_mse} {off} "
        "(predicting the mean digit: {mean}); the codebook's perplexity is {b_p} of "
        f"{k} codes with the blocks and {{u_p}} without.",
        values={"b_mse": b["recon_mse"], "u_mse": u["recon_mse"], "mean": mean_image,
                "b_p": b["perplexity"], "u_p": u["perplexity"],
                "off": _unblocked_words(run)}))
    out.append(Finding(
        "Without only the straight-through block the test MSE is {st_mse} and the "
        "perplexity {st_p}.", values={"st_mse": st["recon_mse"], "st_p": st["perplexity"]}))
    out.append(Finding(
        "Without the codebook cut alone (the codebook term also pulls the encoder) the test "
        "MSE is {cb_mse} with perplexity {cb_p}, against {b_mse} and {b_p} with every cut.",
        values={"cb_mse": cb["recon_mse"], "cb_p": cb["perplexity"],
                "b_mse": b["recon_mse"], "b_p": b["perplexity"]}))
    if "commitment_gradients" in s:
        out.append(_commitment(run, s["commitment_gradients"], b, cm))
    cost = run.costs.get("seconds_per_epoch", {})
    if {BLOCKED, UNBLOCKED} <= set(cost):
        out.append(Finding("An epoch (training and test evaluation) takes {b:s} blocked and "
                           "{u:s} unblocked (one training each, not interleaved).", None, "cost",
                           values={"b": cost[BLOCKED], "u": cost[UNBLOCKED]}))
    return out


def _unblocked_words(run: RunResults) -> str:
    """Which cuts the unblocked variant lacks, in words: "with none" or "without <names>"."""
    patterns = run.config.get("disable_blocks", [])
    off = [name for name in (BLOCK, CODEBOOK_BLOCK, COMMITMENT_BLOCK)
           if any(fnmatch.fnmatchcase(name, p) for p in patterns)]
    return "with none" if len(off) == 3 else f"without {', '.join(off)}"


def _straight_through(run: RunResults, b: dict[str, Any], u: dict[str, Any],
                      st: dict[str, Any]) -> Finding:
    """The headline: the encoder's reconstruction gradient with the straight-through cut and
    without it (alone, and with every block off when the run's patterns include it)."""
    grads = {"b_g": b["encoder_recon_grad_norm"], "st_g": st["encoder_recon_grad_norm"],
             "u_g": u["encoder_recon_grad_norm"]}
    # the unblocked variant lacks the straight-through cut only if its patterns name it
    all_off = any(fnmatch.fnmatchcase(BLOCK, p) for p in run.config.get("disable_blocks", []))
    text = ("With the straight-through block the encoder receives reconstruction gradient "
            "(norm {b_g} after training); without it exactly {st_g} (z_q = e, so ∂z_q/∂z_e = "
            "I − I)" + (", and {u_g} with every block off." if all_off else "."))
    used = {k: v for k, v in grads.items() if k != "u_g" or all_off}
    diverged = [k for k, v in used.items() if v is None]
    holds = not diverged and used["b_g"] > 0 and used["st_g"] == 0.0 and (
        not all_off or used["u_g"] == 0.0)
    return Finding(text, holds, basis=STRAIGHT_THROUGH, values=used,
                   outside="a variant diverged, so no trained encoder was measured (a smaller "
                           "lr keeps training finite)" if diverged else "",
                   headline=Headline("encoder's reconstruction-gradient norm", blocked="b_g",
                                     unblocked="st_g", thresholds=(0.0,),
                                     reading="without the straight-through cut the encoder "
                                             "gets exactly 0"))


def _commitment(run: RunResults, g: dict[str, float], b: dict[str, Any],
                cm: dict[str, Any]) -> Finding:
    """Without the commitment cut alone: the codes' gradient scaled by 1 + β (predicted from
    the run's β), the encoder's unchanged, and how far Adam's training then strays."""
    expect = 1 + float(run.params.get("beta", 0.25))
    gap = math.nan
    with contextlib.suppress(KeyError):
        _, mse_b = run.metric(f"{BLOCKED}/test/recon_mse")
        _, mse_cm = run.metric("without_commitment/test/recon_mse")
        if len(mse_b) == len(mse_cm):
            gap = float(max(abs(mse_cm - mse_b))) if len(mse_b) else math.nan
    holds = abs(g["codes_ratio"] - expect) <= GRADIENT_TOL * expect \
        and g["codes_residual"] <= GRADIENT_TOL and g["encoder_rel_diff"] <= GRADIENT_TOL
    return Finding(
        "Without the commitment cut alone the codes' gradient is {ratio:4}x the blocked one "
        "(1 + β = {expect:4}; the part not parallel to it {residual}) and the encoder's is the "
        "same (relative difference {enc}): Adam then takes the blocked run's steps with its ε "
        "divided by 1 + β, and the test MSE stays within {gap} of the blocked run's at every "
        "epoch ({cm_mse} vs {b_mse} at the end; perplexity {cm_p} vs {b_p}).",
        holds, basis=ADAM_SCALE,
        values={"ratio": g["codes_ratio"], "expect": expect, "residual": g["codes_residual"],
                "enc": g["encoder_rel_diff"], "gap": gap, "cm_mse": cm["recon_mse"],
                "b_mse": b["recon_mse"], "cm_p": cm["perplexity"], "b_p": b["perplexity"]})


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """Reconstructions of test digits, then test MSE and perplexity against epochs."""
    return {
        "reconstructions": (
            _reconstructions_figure(run),
            "Held-out digits (top) and their reconstructions with every stop-gradient in "
            "place, with none, and without only the straight-through cut: without it the "
            "encoder learns nothing from the reconstruction and the digits blur into the "
            "average."),
        "training_curves": (
            _curves_figure(run),
            "Test reconstruction error (left) and codebook perplexity (right) per epoch for "
            "every variant: all blocks (blue), none (dashed vermillion), and without one cut "
            "each; the dark grey dotted line is the error of predicting the mean digit. A "
            "curve that lies on another's says so in the legend: 'identical' where the numbers "
            "are the same, 'indistinguishable' with the largest difference in each panel's "
            "units where they differ by less than a pixel, as without the commitment cut "
            "alone (Adam with its ε divided by 1 + β)."),
    }


#: The reconstructions' rows: artifact key and label.
_ROWS = {"original": "test digit", BLOCKED: "all blocks", UNBLOCKED: "no blocks",
         "without_straight_through": "no straight-through"}


def _reconstructions_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import image_grid

    examples = run.artifact("examples")
    fig, _ = image_grid([(label, examples[key]) for key, label in _ROWS.items()], shape=(8, 8),
                        cell=(0.9, 0.95), pad=(1.8, 0.5),
                        title="test digits and their VQ-VAE reconstructions",
                        label_kw={"rotation": 0, "ha": "right", "va": "center"})
    return fig


def _curves_figure(run: RunResults) -> Any:
    from toolkit.lab.report.figures import legend_below, step_axes, subplots, variant_curves

    fig, axes = subplots(1, 2, figsize=(9.0, 4.2))
    others: list[str] = []
    for ax, key, title in zip(axes, ("test/recon_mse", "codes/perplexity"),
                              ("test reconstruction MSE", "codebook perplexity")):
        variant_curves(ax, run, key, [BLOCKED, UNBLOCKED, *ABLATIONS], others=others)
        step_axes(ax, title)
    axes[0].axhline(run.summary["baseline"]["mean_image_mse"], label="predicting the mean digit",
                    **variant_style("reference"))
    axes[0].set_ylabel("mean squared error")
    axes[1].set_ylabel(f"perplexity (of {run.summary['n_codes']} codes)")
    for ax in axes:  # a curve hidden under another says so in the legend
        note_identical(ax)
    legend_below(fig, axes)
    return fig

