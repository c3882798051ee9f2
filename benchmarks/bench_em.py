"""Benchmark: GaussianMixture (toolkit, float64 and float32) vs scikit-learn's, same run, same start.

All contenders fit the same data (n = 100,000, d = 8, k = 8, full covariances; the numbers are
float32 ones, so that every contender sees the same data) from the same ``weights_init``,
``means_init`` and ``precisions_init`` with ``tol=0``, so each runs exactly ``--iters`` EM
iterations; they are timed in interleaved rounds (``toolkit.lab.measure.race``) and the script
prints the median time per iteration, the median of the per-round ratios toolkit /
scikit-learn (targets on the first data set: float64 <= 0.10, float32 <= 0.05; also in CPU
time, steadier than wall time when other programs share the cores), the median of the
per-round ratios float32 / float64 of the toolkit (target <= 0.67: float32 at least 1.5x as
fast) and the relative
difference of the final lower bounds from scikit-learn's float64 one (targets: 1e-6 and 1e-5).

Two data sets: ``well``, a mixture whose covariances have condition numbers of ~100, and
``ill``, issue 28's recipe (each cluster ``normal(n/k, d) @ normal(d, d) * 0.5 + center``,
centres at scale 100, seed 60: one cluster's covariance has smallest eigenvalue 3.3e-8, so its
fitted one is ~1e-6 = reg_covar and its condition number ~1e7). On ``ill`` the toolkit's
iterations leave the float32 moment path (their cancellation would exceed its tolerance), so
float32 runs at float64 speed there: the script says which paths the iterations took.

It also prints the achieved GFLOP/s of the toolkit's iteration (two GEMMs of (n x q) x (q x k),
q = d(d+1)/2 + d + 1; the whole fit's time divided by its iterations, setup included) next to
the rate of the same two products alone, raced in the same rounds as the fits, and the median
of the per-round ratios fit iteration / GEMMs alone (target <= 1.5); and how the time per
iteration scales with n and k.

    python benchmarks/bench_em.py             # full sizes, 7 rounds
    python benchmarks/bench_em.py --quick     # small sizes, a few seconds
    python benchmarks/bench_em.py --device cuda
"""

from __future__ import annotations

import argparse
import platform
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit.algorithms.em import GaussianMixture
from toolkit.lab.measure import race


def make_data(n: int, d: int, k: int, seed: int = 0) -> np.ndarray:
    """``n`` points from a random ``k``-component mixture in ``d`` dimensions (full covariances)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 4.0, size=(k, d))
    A = rng.normal(size=(k, d, d)) / np.sqrt(d)
    labels = rng.integers(0, k, size=n)
    z = rng.normal(size=(n, d))
    return centers[labels] + np.einsum("nij,nj->ni", A[labels], z) + 0.3 * rng.normal(size=(n, d))


def make_illconditioned(n: int, d: int, k: int, seed: int = 60, center_scale: float = 100.0
                        ) -> np.ndarray:
    """Issue 28's recipe: each cluster ``normal(n/k, d) @ normal(d, d) * 0.5 + center``."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(k, d, d)) * 0.5
    centers = rng.normal(0.0, center_scale, size=(k, d))
    labels = np.repeat(np.arange(k), n // k)
    return centers[labels] + np.einsum("ni,nij->nj", rng.normal(size=(len(labels), d)), A[labels])


DATASETS = {"well": make_data, "ill": make_illconditioned}


def initial_params(X: np.ndarray, k: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Uniform weights, k distinct data points as means, the inverse data covariance as precision."""
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    prec = np.linalg.inv(np.cov(X[:10_000].T))
    return {"weights_init": np.full(k, 1.0 / k),
            "means_init": X[rng.choice(len(X), k, replace=False)],
            "precisions_init": np.broadcast_to(prec, (k, d, d)).copy()}


def _fit(make, X) -> dict[str, float]:
    out: dict[str, float] = {}

    def fit() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = make().fit(X)
        out["lower_bound"] = float(model.lower_bound_)
    return fit, out


def contenders(n: int, d: int, k: int, iters: int, device: str, dataset: str = "well"
               ) -> tuple[dict, dict, dict]:
    """Fits to race, their lower bounds (filled when they run), and how to remake each model."""
    X = DATASETS[dataset](n, d, k).astype(np.float32).astype(np.float64)
    kw = {"covariance_type": "full", "max_iter": iters, "tol": 0.0, **initial_params(X, k)}
    fits, bounds = {}, {}
    data = {"sklearn": X,
            "toolkit f64": torch.as_tensor(X, device=device),
            "toolkit f32": torch.as_tensor(X, dtype=torch.float32, device=device)}
    makers = {"sklearn": lambda: SkGaussianMixture(k, **kw),
              "toolkit f64": lambda: GaussianMixture(k, device=device, **kw),
              "toolkit f32": lambda: GaussianMixture(k, device=device, dtype="float32", **kw)}
    for name, make in makers.items():
        fits[name], bounds[name] = _fit(make, data[name])
    return fits, bounds, {name: (makers[name], data[name]) for name in makers}


def paths_taken(make, X) -> list[int]:
    """Iterations of the toolkit's fit on each path: float32 moments, float64 moments, centred.

    (``toolkit.algorithms.em.fast``: a path is used only where its cancellation is small.)
    """
    import toolkit.algorithms.em.estimator as estimator

    seen = []

    class Recording(estimator.EMPath):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            seen.append(self)

    estimator.EMPath = Recording
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            make().fit(X)
    finally:
        estimator.EMPath = Recording.__base__
    return seen[-1].counts


def gemm_contenders(n: int, q: int, k: int, iters: int, device: str) -> dict:
    """The iteration's two GEMMs alone, ``iters`` times: ``2·iters`` products (n x q) @ (q x k)
    per call, in float64 and float32, to race in the same rounds as the fits."""
    out = {}
    for name, dtype in (("gemms f64", torch.float64), ("gemms f32", torch.float32)):
        phi = torch.randn(n, q, dtype=dtype, device=device)
        a = torch.randn(q, k, dtype=dtype, device=device)

        def gemms(phi: torch.Tensor = phi, a: torch.Tensor = a) -> None:
            for _ in range(2 * iters):
                phi @ a
        out[name] = gemms
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--device", default="cpu", help="torch device of the toolkit models")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--iters", type=int, default=20, help="EM iterations per fit")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--data", default="well,ill", help="data sets, comma-separated: "
                        + ", ".join(DATASETS))
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling table")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"bench_em: --device {args.device}: torch reports no CUDA device here")
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    n, d, k = (20_000, 8, 8) if args.quick else (100_000, 8, 8)
    rounds = 2 if args.quick else args.rounds
    iters = 5 if args.quick else args.iters
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{platform.processor() or platform.machine()}, device={args.device}")
    summary = []
    q = d * (d + 1) // 2 + d + 1
    for dataset in args.data.split(","):
        fits, bounds, models = contenders(n, d, k, iters, args.device, dataset)
        if dataset == "well":
            fits.update(gemm_contenders(n, q, k, iters, args.device))
        result = race(fits, rounds=rounds, warmup=1, device=args.device)
        print(f"\ndata={dataset}: n={n:,} d={d} k={k} full, {iters} iterations, tol=0, same "
              f"start, {rounds} interleaved rounds (median ms per iteration):")
        ref = bounds["sklearn"]["lower_bound"]
        diffs = {}
        for name in bounds:
            lb = bounds[name]["lower_bound"]
            diffs[name] = abs(lb - ref) / abs(ref)
            print(f"  {name:<12} {result.median(name) / iters * 1e3:8.2f} ms/iter   lower bound "
                  f"{lb:.12f}   rel. diff from sklearn float64 {diffs[name]:.1e}")
        ratios = {}
        for name, target in (("toolkit f64", 0.10), ("toolkit f32", 0.05)):
            ratios[name] = result.ratio(name, "sklearn")
            cpu = result.ratio(name, "sklearn", clock="cpu")
            ratios[name + " cpu"] = cpu
            print(f"  {name} / sklearn = {ratios[name]}   (target <= {target} on data=well)\n"
                  f"        CPU time: {cpu}")
        ratios["f32/f64"] = result.ratio("toolkit f32", "toolkit f64")
        print(f"  f32 / f64 = {ratios['f32/f64']}   (target <= 0.67 on data=well)")
        for name in ("toolkit f64", "toolkit f32"):
            counts = paths_taken(*models[name])
            print(f"  {name} iterations by path: float32 moments {counts[0]}, float64 moments "
                  f"{counts[1]}, centred float64 {counts[2]}")
        summary.append((dataset, ratios, diffs))
        if dataset == "well":
            flops = 2 * 2 * n * q * k  # the E-step's and the M-step's GEMM
            for name, gemms in (("toolkit f64", "gemms f64"), ("toolkit f32", "gemms f32")):
                fit_rate = flops / (result.median(name) / iters) / 1e9
                alone_rate = flops / (result.median(gemms) / iters) / 1e9
                ratios[name + " gemms"] = result.ratio(name, gemms)
                print(f"  {name}: {fit_rate:.1f} GFLOP/s per iteration (GEMMs only; the whole "
                      f"fit's time / iterations) vs {alone_rate:.1f} GFLOP/s for the same GEMMs "
                      f"alone\n    ratio fit / GEMMs {ratios[name + ' gemms']}   (target <= 1.5)")
    print("\nsummary (median per-round ratio to sklearn's whole fit, wall and CPU time; rel. "
          "diff of the final lower bound):\n"
          f"  {'data':<6} {'f64 wall':>9} {'f64 cpu':>8} {'f32 wall':>9} {'f32 cpu':>8} "
          f"{'f32/f64':>8} {'f64 rel.diff':>13} {'f32 rel.diff':>13}")
    for dataset, ratios, diffs in summary:
        print(f"  {dataset:<6} {ratios['toolkit f64'].median:>9.3f} "
              f"{ratios['toolkit f64 cpu'].median:>8.3f} {ratios['toolkit f32'].median:>9.3f} "
              f"{ratios['toolkit f32 cpu'].median:>8.3f} {ratios['f32/f64'].median:>8.3f} "
              f"{diffs['toolkit f64']:>13.1e} "
              f"{diffs['toolkit f32']:>13.1e}")
    if args.no_scaling:
        return 0
    print("\nscaling (toolkit f64 and f32 / sklearn, median ms per iteration):")
    cases = [(5_000, 8), (20_000, 8), (20_000, 16)] if args.quick else \
        [(10_000, 8), (100_000, 8), (300_000, 8), (100_000, 4), (100_000, 16)]
    print(f"  {'n':>9} {'k':>3} {'f64 ms':>8} {'f32 ms':>8} {'sklearn ms':>11} {'f64 ratio':>10}"
          f" {'f32 ratio':>10}")
    for n_case, k_case in cases:
        fits, _, _ = contenders(n_case, d, k_case, iters, args.device)
        r = race(fits, rounds=max(1, rounds // 2), warmup=1, device=args.device)
        print(f"  {n_case:>9,} {k_case:>3} {r.median('toolkit f64') / iters * 1e3:>8.2f} "
              f"{r.median('toolkit f32') / iters * 1e3:>8.2f} "
              f"{r.median('sklearn') / iters * 1e3:>11.2f} "
              f"{r.ratio('toolkit f64', 'sklearn').median:>10.3f} "
              f"{r.ratio('toolkit f32', 'sklearn').median:>10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
