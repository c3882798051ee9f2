"""Softmax with and without the ``softmax.max`` block: gradients, overflow and cost.

``stable_softmax`` computes ``softmax(x) = softmax(x − m)`` with ``m = stop_gradient(max x)``.
Softmax is shift-invariant, so the gradient that flows through ``m`` when the block is
disabled is zero in exact arithmetic: blocked and unblocked gradients must agree up to
rounding, at every logit scale and precision, including rows whose maximum is tied (where
``amax``'s backward splits the gradient of the max among the tied entries). What the block
buys is cost: a smaller backward graph, less time and memory. What the shift buys is range:
the naive ``exp(x) / Σ exp(x)`` overflows once a logit passes ``log(finfo.max)``.

Three parts:

1. **Gradients** over logit scales ``s`` (inputs ``s·u``, ``u ~ N(0, 1)``, plus a copy of ``u``
   whose rows have ``n_tied`` tied maxima), dtypes float64/float32/bfloat16/float16: the
   gradient of ``Σ w ⊙ softmax(x)`` blocked, unblocked and from ``torch.softmax`` in the same
   dtype (and, for float16/bfloat16, blocked with ``dtype=torch.float32``: ``upcast``), each
   scored against ``torch.softmax``'s float64 gradient of the same (rounded) input, and
   blocked vs unblocked directly. Metrics are logged with ``step`` = index into ``scales``.
2. **Overflow** of the naive form: the smallest representable ``c`` for which
   ``naive_softmax([c, 0])`` is not finite (bisection on the bit patterns of the dtype),
   against ``log(finfo.max)``; and the fraction of non-finite rows vs scale for random logits.
3. **Cost** (float32, on the run's device): forward+backward time, autograd node count, peak
   memory and bytes saved for backward, for blocked, unblocked, ``torch.softmax`` and the
   fused ``torch.autograd.Function`` path.

References:
    Blanchard, Higham, Higham (2021), Accurately computing the log-sum-exp and softmax
    functions, IMA J. Numer. Anal. 41(4), https://doi.org/10.1093/imanum/draa038
    TensorFlow ``tf.stop_gradient`` documentation (the softmax example),
    https://www.tensorflow.org/api_docs/python/tf/stop_gradient
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Literal

import torch
from pydantic import Field, field_validator, model_validator

from toolkit import compare_gradients, gradient_graph
from toolkit.algorithms.softmax import BLOCK, naive_softmax, stable_softmax
from toolkit.lab import (
    ExperimentParams,
    Finding,
    Headline,
    RunContext,
    RunResults,
    Story,
    TimeRatio,
    fmt,
)
from toolkit.lab.results.schema import BLOCKED, UNBLOCKED

from .cost import run_costs
from .metrics import METRICS as METRICS  # what each logged metric means: the docs' glossary

DESCRIPTION = ("softmax: gradient through the max (blocked vs not) over scales and dtypes; "
               "overflow; cost")
STORY = Story(
    compares="the gradient of the stable softmax with the max shift blocked and not, against "
             "torch.softmax's float64 gradient, over logit scales 1 to 10⁴ in four precisions "
             "(also with tied maxima); the naive exp(x)/Σexp(x); and the cost of each",
    block=f"{BLOCK}: softmax(x) = softmax(x − stop_gradient(max x))",
    prediction="softmax is shift-invariant, so the gradient through the max is zero: blocked "
               "and unblocked agree to rounding everywhere; the block only saves graph nodes "
               "and bytes saved for backward (its time is measured: too small to predict), "
               "while the shift itself keeps exp from overflowing above log(finfo.max)",
)

DTYPES: dict[str, torch.dtype] = {"float64": torch.float64, "float32": torch.float32,
                                  "bfloat16": torch.bfloat16, "float16": torch.float16}
DtypeName = Literal["float64", "float32", "bfloat16", "float16"]
KINDS = ("random", "tied")
GRAD_VARIANTS = (BLOCKED, UNBLOCKED, "torch", "upcast")
LOW_PRECISION = (torch.float16, torch.bfloat16)


class Params(ExperimentParams):
    scales: list[float] = Field(
        default_factory=lambda: [1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1e3, 3e3, 1e4],
        description="logit scales s: the inputs are s·u with u ~ N(0, 1)")
    dtypes: list[DtypeName] = Field(
        default_factory=lambda: ["float64", "float32", "bfloat16", "float16"],
        description="precisions to compute the gradients in")
    n_rows: int = Field(64, ge=1, description="rows of the gradient-test input")
    n_cols: int = Field(128, ge=2, description="columns (softmax length) of the gradient-test input")
    n_tied: int = Field(3, ge=2, description="entries sharing the maximum in each tied row")
    failure_points: int = Field(
        41, ge=2, description="log-spaced scales from 1 to max(scales) for the overflow sweep")
    cost_shapes: list[tuple[int, int]] = Field(
        default_factory=lambda: [(4096, 4096), (64, 50000)],
        description="(rows, cols) of the float32 inputs whose cost is measured; [] skips")
    cost_repeat: int = Field(9, ge=1, description="interleaved timing rounds (one forward+backward "
                             "per variant each; 6 or more give a 95 % interval of the median ratio)")
    cost_warmup: int = Field(1, ge=0, description="untimed calls per variant first")

    @field_validator("scales")
    @classmethod
    def _positive_scales(cls, scales: list[float]) -> list[float]:
        if not scales:
            raise ValueError("give at least one scale")
        if any(not (s > 0 and math.isfinite(s)) for s in scales):
            raise ValueError(f"scales must be finite and > 0, got {scales}")
        return sorted(scales)

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, dtypes: list[str]) -> list[str]:
        if not dtypes:
            raise ValueError("give at least one dtype")
        if len(set(dtypes)) != len(dtypes):
            raise ValueError(f"dtypes are listed twice in {dtypes}")
        return dtypes

    @field_validator("cost_shapes")
    @classmethod
    def _shapes(cls, shapes: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for shape in shapes:
            if min(shape) < 1:
                raise ValueError(f"cost shapes must be positive, got {list(shape)}")
        return shapes

    @model_validator(mode="after")
    def _tied_fits(self) -> Params:
        if self.n_tied > self.n_cols:
            raise ValueError(f"n_tied ({self.n_tied}) must be <= n_cols ({self.n_cols})")
        return self


QUICK: dict[str, Any] = {
    "scales": [1.0, 10.0, 100.0, 1e3, 1e4],
    "n_rows": 16,
    "n_cols": 32,
    "failure_points": 17,
    "cost_shapes": [(256, 256), (8, 5000)],
    "cost_repeat": 9,
}


# --- data -----------------------------------------------------------------------------------------


def make_inputs(n_rows: int, n_cols: int, n_tied: int, *, generator: torch.Generator
                ) -> dict[str, torch.Tensor]:
    """Float64 base logits ``random`` (N(0, 1)), ``tied`` (the same with ``n_tied`` entries of
    each row set to ``row max + 1``, so exactly ``n_tied`` tied maxima) and weights ``w``."""
    u = torch.randn(n_rows, n_cols, generator=generator, dtype=torch.float64)
    w = torch.randn(n_rows, n_cols, generator=generator, dtype=torch.float64)
    cols = torch.argsort(torch.rand(n_rows, n_cols, generator=generator), dim=1)[:, :n_tied]
    top = (u.amax(dim=1, keepdim=True) + 1.0).expand(-1, n_tied)
    tied = u.scatter(1, cols, top)
    return {"random": u, "tied": tied, "w": w}


# --- the comparison: 1. gradients, 2. overflow of the naive form, 3. cost -------------------------


def run(params: Params, ctx: RunContext) -> None:
    inputs = make_inputs(params.n_rows, params.n_cols, params.n_tied, generator=ctx.generator)
    with ctx.timer("gradients"):
        grads = run_gradients(params, ctx, inputs)
    ctx.save_artifact("gradients", {"scales": params.scales, "dtypes": params.dtypes,
                                    "kinds": list(KINDS), "results": grads})
    with ctx.timer("overflow"):
        failure = run_failure(params, ctx, inputs["random"])
    ctx.save_artifact("failure", failure)
    summary = gradient_summary(grads)
    summary["rounding_bound"] = rounding_bounds(params, inputs["w"])
    summary["difference_bound"] = difference_bounds(params, inputs["w"])
    summary["inputs_overflow_at_scale"] = inputs_overflow(params, inputs)
    summary["naive"] = {name: {k: v for k, v in d.items() if not k.endswith("_fraction")}
                        for name, d in failure["dtypes"].items()}
    summary["stable"] = {"nonfinite_rows_any_scale": {
        name: max(d["stable_nonfinite_fraction"]) for name, d in failure["dtypes"].items()}}
    ctx.summary(**summary)
    if params.cost_shapes:
        with ctx.timer("cost"):
            cost_summary, costs = run_costs(params, ctx)
        ctx.summary(**cost_summary)
        ctx.costs(**costs)
    x = torch.tensor([[1.0, 3.0, 2.0], [0.5, 0.5, -1.0]], requires_grad=True)
    w = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, 1.0]])
    ctx.save_artifact("graph", gradient_graph(lambda: (stable_softmax(x) * w).sum(),
                                              {"logits": [x]}).to_dict())


# --- 1. gradients ---------------------------------------------------------------------------------


def _errors(g: torch.Tensor, ref: torch.Tensor) -> dict[str, float | None]:
    """Largest and relative error of ``g`` against ``ref`` (``None`` where not finite)."""
    g = g.double()
    diff = g - ref
    finite = bool(torch.isfinite(g).all())
    ref_norm, diff_norm = float(ref.norm()), float(diff.norm())
    rel = (None if not finite else diff_norm / ref_norm if ref_norm > 0
           else 0.0 if diff_norm == 0.0 else None)
    return {"max_abs_err": float(diff.abs().max()) if finite else None, "rel_err": rel,
            "finite": finite}


def gradient_errors(x: torch.Tensor, w: torch.Tensor, disable: tuple[str, ...]
                    ) -> dict[str, dict[str, Any]]:
    """Gradients of ``Σ w ⊙ softmax(x)`` (x, w in the same dtype) blocked, unblocked, from
    ``torch.softmax`` and, for float16/bfloat16, blocked with ``dtype=torch.float32``
    (``upcast``), scored against ``torch.softmax``'s float64 gradient of the same input."""
    xg = x.clone().requires_grad_()
    cmp = compare_gradients(lambda: (w * stable_softmax(xg)).sum(), {"x": xg}, disable=disable)
    (g_torch,) = torch.autograd.grad((w * torch.softmax(xg, -1)).sum(), xg)
    xr = x.double().requires_grad_()
    (g_ref,) = torch.autograd.grad((w.double() * torch.softmax(xr, -1)).sum(), xr)
    grads = {BLOCKED: cmp.blocked["x"], UNBLOCKED: cmp.unblocked["x"], "torch": g_torch}
    if x.dtype in LOW_PRECISION:
        loss = (w.float() * stable_softmax(xg, dtype=torch.float32)).sum()
        (grads["upcast"],) = torch.autograd.grad(loss, xg)
    out: dict[str, Any] = {v: _errors(g, g_ref) for v, g in grads.items()}
    out.setdefault("upcast", None)
    b, u = grads[BLOCKED].double(), grads[UNBLOCKED].double()
    both_finite = bool(torch.isfinite(b).all() and torch.isfinite(u).all())
    out["blocked_vs_unblocked"] = {
        "max_abs_diff": float((b - u).abs().max()) if both_finite else None,
        "rel_diff": cmp.overall.to_dict()["rel_diff"], "n_different": int((b != u).sum())}
    return out


def rounding_bounds(params: Params, w: torch.Tensor) -> dict[str, float]:
    """A first-order bound on the max abs error of the gradient of ``Σ w ⊙ softmax(x)`` in each
    dtype: ``(4n + 12) u max|w|`` (n = softmax length, u = the dtype's unit roundoff).

    The gradient is ``g = s ⊙ (w − ⟨s, w⟩)``. The computed shifted softmax has relative error
    ``≤ (n + 2)u + |x_i − m| u`` (Blanchard, Higham & Higham 2021), and ``Σ s_j (m − x_j) ≤
    log n``; the sum ``⟨s, w⟩`` adds ``n u``, the difference and product ``2u``. Together
    ``|ĝ_i − g_i| ≤ (4n + 10 + 2/e + log n) u max|w|``, under ``(4n + 12) u max|w|`` for
    n ≤ 2**30. A bound, not an estimate: the measured errors sit far below it.
    """
    n = params.n_cols
    return {name: (4 * n + 12) * torch.finfo(DTYPES[name]).eps / 2
            * float(w.to(DTYPES[name]).double().abs().max()) for name in params.dtypes}


def difference_bounds(params: Params, w: torch.Tensor) -> dict[str, float]:
    """A first-order bound on ``max |blocked − unblocked|`` in each dtype:
    ``(6n + 12 + 3 log n) u max|w|``.

    Without the block the gradient gains ``−Σ_i ĝ_i`` at the argmax (split among tied maxima):
    the computed gradients' sum, which is 0 in exact arithmetic. So it is the sum of their
    errors plus the rounding of the sum. With ``g_i = s_i (w_i − c)``, ``c = ⟨s, w⟩``, ``ŝ_i =
    s_i(1 + σ_i)``, ``|σ_i| ≤ (n + 2)u + |x_i − m| u`` (Blanchard, Higham & Higham 2021) and
    ``Σ s_i (m − x_i) ≤ log n``: ``|ĉ − c| ≤ (2n + 2 + log n) u max|w|``, ``Σ |ĝ_i − g_i| ≤
    (4n + 10 + 3 log n) u max|w|``; the sum adds ``n u Σ|ĝ_i| ≤ 2n u max|w|`` and the final
    addition ``2u max|w|``. A bound, not an estimate: the measured differences sit far below.
    """
    n = params.n_cols
    return {name: (6 * n + 12 + 3 * math.log(n)) * torch.finfo(DTYPES[name]).eps / 2
            * float(w.to(DTYPES[name]).double().abs().max()) for name in params.dtypes}


def inputs_overflow(params: Params, inputs: dict[str, torch.Tensor]) -> dict[str, float | None]:
    """Per dtype, the first scale at which the inputs ``s·u`` themselves are not finite in it
    (``None``: finite at every scale): there the softmax has nothing finite to compute."""
    out: dict[str, float | None] = {}
    for name in params.dtypes:
        out[name] = next((scale for scale in params.scales if not all(
            bool(torch.isfinite((scale * inputs[kind]).to(DTYPES[name])).all())
            for kind in KINDS)), None)
    return out


def run_gradients(params: Params, ctx: RunContext, inputs: dict[str, torch.Tensor]
                  ) -> dict[str, Any]:
    """:func:`gradient_errors` per dtype, input kind and scale (``step`` = index of the scale)."""
    results: dict[str, Any] = {}
    bar = ctx.progress(total=len(params.dtypes) * len(KINDS) * len(params.scales),
                       desc="gradients")
    for name, kind in itertools.product(params.dtypes, KINDS):
        w = inputs["w"].to(ctx.device, DTYPES[name])
        rows = results.setdefault(name, {}).setdefault(kind, [])
        for step, scale in enumerate(params.scales):
            x = (scale * inputs[kind]).to(ctx.device, DTYPES[name])
            rows.append(err := gradient_errors(x, w, ctx.disable_patterns))
            ctx.log(step, **{f"{v}/grad_{kind}/{name}_max_abs_err": err[v]["max_abs_err"]
                             for v in GRAD_VARIANTS if err[v] is not None},
                    **{f"blocked_vs_unblocked/grad_{kind}/{name}_max_abs_diff":
                       err["blocked_vs_unblocked"]["max_abs_diff"]})
            bar.update()
    bar.close()
    return results


def _max_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else max(values)


def gradient_summary(results: dict[str, Any]) -> dict[str, Any]:
    """Worst case over scales, per variant, dtype and input kind."""
    out: dict[str, Any] = {v: {} for v in (*GRAD_VARIANTS, "blocked_vs_unblocked")}
    for name, kinds in results.items():
        for kind, rows in kinds.items():
            for v in GRAD_VARIANTS:
                if rows[0][v] is None:
                    continue
                out[v].setdefault("grad_max_abs_err_vs_float64", {}).setdefault(name, {})[kind] = \
                    _max_or_none([r[v]["max_abs_err"] for r in rows])
                out[v].setdefault("grad_all_finite", {}).setdefault(name, {})[kind] = \
                    all(r[v]["finite"] for r in rows)
            diffs = [r["blocked_vs_unblocked"] for r in rows]
            entry = out["blocked_vs_unblocked"]
            entry.setdefault("max_abs_diff", {}).setdefault(name, {})[kind] = \
                _max_or_none([d["max_abs_diff"] for d in diffs])
            entry.setdefault("max_rel_diff", {}).setdefault(name, {})[kind] = \
                _max_or_none([d["rel_diff"] for d in diffs])
    return out


# --- 2. overflow of the naive form ----------------------------------------------------------------

_INT_OF_SIZE = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def overflow_threshold(dtype: torch.dtype, *, device: torch.device | str = "cpu"
                       ) -> tuple[float, float]:
    """``(last_finite, first_failing)``: adjacent ``dtype`` values of ``c`` around the point
    where ``naive_softmax([c, 0])`` stops being finite, by bisection on the bit patterns
    (positive floats are ordered like their bit patterns)."""
    itype = _INT_OF_SIZE[torch.finfo(dtype).bits // 8]

    def bits(value: float) -> int:
        return int(torch.tensor([value], dtype=dtype).view(itype))

    def value(pattern: int) -> float:
        return float(torch.tensor([pattern], dtype=itype).view(dtype))

    def fails(c: float) -> bool:
        x = torch.tensor([c, 0.0], dtype=dtype, device=device)
        return not bool(torch.isfinite(naive_softmax(x)).all())

    lo, hi = bits(1.0), bits(2 * math.log(torch.finfo(dtype).max))
    if fails(value(lo)) or not fails(value(hi)):
        raise RuntimeError(f"overflow_threshold: no sign change for {dtype} between 1 and "
                           f"2·log(finfo.max)")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(value(mid)):
            hi = mid
        else:
            lo = mid
    return value(lo), value(hi)


def run_failure(params: Params, ctx: RunContext, u: torch.Tensor) -> dict[str, Any]:
    top = math.log10(max(params.scales))
    scales = torch.logspace(0.0, max(top, 0.0), params.failure_points, dtype=torch.float64)
    out: dict[str, Any] = {"scales": scales.tolist(), "dtypes": {}}
    for name in params.dtypes:
        dtype = DTYPES[name]
        last_ok, first_bad = overflow_threshold(dtype, device=ctx.device)
        naive, stable = [], []
        for scale in scales.tolist():
            x = (scale * u).to(ctx.device, dtype)
            naive.append(float((~torch.isfinite(naive_softmax(x)).all(-1)).double().mean()))
            stable.append(float((~torch.isfinite(stable_softmax(x)).all(-1)).double().mean()))
        first = next((s for s, f in zip(scales.tolist(), naive) if f > 0), None)
        out["dtypes"][name] = {
            "threshold_first_failing": first_bad, "threshold_last_finite": last_ok,
            "log_finfo_max": math.log(torch.finfo(dtype).max), "naive_nonfinite_fraction": naive,
            "stable_nonfinite_fraction": stable, "first_failing_scale_random": first}
    return out


# --- findings -------------------------------------------------------------------------------------

SHAPE = re.compile(r"^\d+x\d+$")  # the cost shapes' labels, e.g. "256x256"
SHIFT = ("shift invariance: softmax(x − m) = softmax(x) for every m, so ∂softmax/∂m = 0 and the "
         "gradient through the max vanishes")


def _inputs_outside(s: dict[str, Any], dtypes: tuple[str, ...] | None = None) -> str:
    """Why a run's scales lie outside what the predictions cover: finite inputs. Empty when
    every dtype's inputs (of ``dtypes``, default all) are finite at every scale."""
    over = {n: v for n, v in s.get("inputs_overflow_at_scale", {}).items()
            if v is not None and (dtypes is None or n in dtypes)}
    if not over:
        return ""
    where = ", ".join(f"in {n} from s = {fmt(v)}" for n, v in over.items())
    return (f"the inputs s·u themselves overflow {where}; the predictions cover finite "
            f"inputs, so keep the largest scale times max|u| under the dtype's finfo.max.")


def findings(run: RunResults) -> list[Finding]:
    """Four or five sentences with their numbers and verdicts, from ``summary.json`` and
    ``costs.json``. The gradients' thresholds are first-order rounding bounds computed from
    the run's softmax length and weights (:func:`difference_bounds`, :func:`rounding_bounds`);
    scales at which the inputs themselves overflow are outside what theory covers."""
    s = run.summary
    outside = _inputs_outside(s)
    diff = s["blocked_vs_unblocked"]["max_abs_diff"]
    eps = {name: torch.finfo(DTYPES[name]).eps for name in diff}
    bounds = s.get("difference_bound") or {n: 64 * eps[n] for n in diff}  # older runs: 64 eps
    worst = {name: max((v for v in kinds.values() if v is not None), default=None)
             for name, kinds in diff.items()}
    values: dict[str, Any] = {f"d_{n}": worst[n] for n in worst}
    values.update({f"eps_{n}": eps[n] for n in worst})
    values.update({f"bound_{n}": bounds[n] for n in worst})
    tied = "float64" in diff
    if tied:
        values["tied"] = diff["float64"]["tied"]
    out = [Finding(
        "Blocked and unblocked gradients agree to rounding at every scale: the largest "
        "difference is " + ", ".join(f"{{d_{n}}} in {n} (eps {{eps_{n}}}, bound {{bound_{n}}})"
                                     for n in worst)
        + ("; with tied maxima {tied} in float64" if tied else "") + ".",
        all(worst[n] is not None and worst[n] <= bounds[n] for n in worst),
        basis=SHIFT + "; what rounding leaves of it is bounded to first order by "
              "(6n + 12 + 3 log n) u max|w| (n: the softmax length)",
        values=values, outside=outside)]
    err = s[BLOCKED]["grad_max_abs_err_vs_float64"]
    ref = s["torch"]["grad_max_abs_err_vs_float64"]
    if "float32" in err:
        b32, t32 = _worst(err["float32"]), _worst(ref["float32"])
        bound = s["rounding_bound"]["float32"]
        out.append(Finding(
            "In float32 the blocked gradient is within {b} of torch.softmax's float64 gradient, "
            "under the rounding-error bound {bound}; torch.softmax in float32 is within {t}.",
            b32 is not None and b32 <= bound,
            basis="the shifted formula is accurate to a small multiple of the unit roundoff "
                  "(Blanchard, Higham & Higham 2021): (4n + 12) u max|w| for the gradient",
            values={"b": b32, "t": t32, "bound": bound},
            outside=_inputs_outside(s, ("float32",))))
    naive, stable = s["naive"], s["stable"]["nonfinite_rows_any_scale"]
    # float32 and float16 stand for bfloat16 and float64 (the same ranges, or far beyond)
    shown = [n for n in naive if n in ("float32", "float16")] or list(naive)
    values = {f"c_{n}": naive[n]["threshold_first_failing"] for n in shown}
    values.update({f"log_{n}": naive[n]["log_finfo_max"] for n in shown})
    values.update({f"s_{n}": v for n, v in stable.items()})
    out.append(Finding(
        "The naive form overflows at " + ", ".join(
            f"c = {{c_{n}:4}} in {n} (log finfo.max = {{log_{n}:4}})" for n in shown)
        + "; the stable form gave no non-finite row at any scale ("
        + ", ".join(f"{n}: {{s_{n}}}" for n in stable) + ").",
        all(abs(d["threshold_first_failing"] - d["log_finfo_max"]) <= 0.01 * d["log_finfo_max"]
            for d in naive.values()) and not any(stable.values()),
        basis="the closed form: exp(c) overflows once c > log(finfo.max), and the shifted "
              "exponents are ≤ 0", values=values, seed_independent=True, outside=outside))
    return out + _cost_findings(s, run.costs)


def _worst(kinds: dict[str, float | None]) -> float | None:
    """The largest error over input kinds; ``None`` where one is not finite."""
    return None if any(v is None for v in kinds.values()) else max(kinds.values())


def _cost_findings(s: dict[str, Any], c: dict[str, Any]) -> list[Finding]:
    """Graph and memory (deterministic) and time (measured) of the first cost shape."""
    labels = [k for k in s[BLOCKED] if SHAPE.match(k)]
    if not labels:
        return []
    label = labels[0]
    b, u = s[BLOCKED][label], s[UNBLOCKED][label]
    out = [Finding(
        f"The block saves graph and memory ({label}, float32): {{nb}} autograd nodes instead "
        "of {nu}, {sb:B} saved for backward instead of {su:B}.",
        b["graph_nodes"] < u["graph_nodes"]
        and b["saved_tensor_bytes"] < u["saved_tensor_bytes"], "cost",
        basis="without the cut the max and its backward join the graph, and amax saves its "
              "input for backward",
        values={"nb": b["graph_nodes"], "nu": u["graph_nodes"],
                "sb": b["saved_tensor_bytes"], "su": u["saved_tensor_bytes"]},
        seed_independent=True,
        headline=Headline("autograd nodes of softmax's graph", blocked="nb", unblocked="nu",
                          reading="2 more nodes (the max) for a gradient that cancels: "
                                  "pure cost"))]
    rounds = c.get("ratio_rounds", {}).get(label, {}).get("blocked_over_unblocked")
    if rounds:
        out.append(Finding(
            f"Forward+backward ({label}, float32) takes {{timing}} the unblocked time "
            "(median of per-round ratios over interleaved rounds). Not a prediction: the "
            "saved graph and memory above are certain, but how much time they save depends "
            "on the machine's kernels and on the shape.",
            topic="cost", timing=TimeRatio(tuple(rounds))))
    return out


# --- figures, drawn only from the run's files (the report imports matplotlib, not the run) --------


def figures(run: RunResults) -> dict[str, Any]:
    """Gradient error vs scale per dtype; naive vs stable overflow; cost bars; the graph (each
    but the graph drawn by ``drawing.py``)."""
    from toolkit import draw_gradient_graph

    from .drawing import cost_figure, failure_figure, gradient_figure

    out: dict[str, Any] = {
        "gradient_difference_vs_scale": (
            gradient_figure(run),
            "Largest gradient error against torch.softmax's float64 gradient over logit scales "
            "s, per precision (columns), for random logits and for rows with tied maxima; with "
            "several seeds, one line per seed. Blocked (filled circles) and unblocked (open "
            "squares) lie within rounding of each other: the black crosses, their difference, "
            "stay within a few units of the dtype's eps (grey line), far under the rounding "
            "bound the findings read; exact zeros are drawn at 1e-20."),
        "naive_vs_stable_failure": (
            failure_figure(run),
            "Left: the share of rows that overflow with the naive form as the logits grow, "
            "per precision (bfloat16 has float32's exponent range, so their curves are the "
            "same); the stable form never overflows. Right: the smallest c at which "
            "naive_softmax([c, 0]) is no longer finite (bars), on log(finfo.max) of each "
            "precision (black marks)."),
    }
    if any(SHAPE.match(k) for k in run.costs.get(BLOCKED, {})):
        out["cost_bars"] = (cost_figure(run),
                            f"Cost of one forward+backward in float32 (seed {run.seed}) per "
                            "variant and input shape: time, autograd nodes, peak memory and "
                            "bytes saved for backward; the fused path and torch.softmax are "
                            "the floor the block cannot beat.")
    if "graph" in run.artifact_names():
        out["graph"] = (draw_gradient_graph(run.artifact("graph")),
                        "The backward graph of the stable softmax with its cut softmax.max "
                        "marked: behind it (dashed) the max, which gradient never needs.")
    return out
