"""Benchmark: GaussianMixture (toolkit) vs scikit-learn's GaussianMixture, same run, same start.

Both fit the same data from the same initial parameters (``weights_init``, ``means_init``,
``precisions_init``) with ``tol=0``, so both run exactly ``iters`` EM iterations; the script
prints the time per iteration of each, their ratio (toolkit / scikit-learn; acceptance: ≤ 0.25
at n=100,000, d=8, k=8, full covariances, 50 iterations) and the relative difference of the final
lower bounds (acceptance: ≤ 1e-6), then how the time per iteration grows with n.

    python benchmarks/bench_em.py            # n=1e5 (50 iterations) + scaling over 1e4, 1e5, 1e6
    python benchmarks/bench_em.py --quick    # small sizes, a few seconds
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit.algorithms.em import GaussianMixture


def make_data(n: int, d: int, k: int, seed: int = 0) -> np.ndarray:
    """``n`` points from a random ``k``-component mixture in ``d`` dimensions (full covariances)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 4.0, size=(k, d))
    A = rng.normal(size=(k, d, d)) / np.sqrt(d)
    labels = rng.integers(0, k, size=n)
    z = rng.normal(size=(n, d))
    return centers[labels] + np.einsum("nij,nj->ni", A[labels], z) + 0.3 * rng.normal(size=(n, d))


def initial_params(X: np.ndarray, k: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Uniform weights, k distinct data points as means, the inverse data covariance as precision."""
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    prec = np.linalg.inv(np.cov(X[:10_000].T))
    return {"weights_init": np.full(k, 1.0 / k),
            "means_init": X[rng.choice(len(X), k, replace=False)],
            "precisions_init": np.broadcast_to(prec, (k, d, d)).copy()}


def time_fit(make, X, repeat: int) -> tuple[float, float]:
    """Best wall time of ``repeat`` fits and the final lower bound."""
    best, lb = float("inf"), float("nan")
    for _ in range(repeat):
        model = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t0 = time.perf_counter()
            model.fit(X)
            if isinstance(model, GaussianMixture) and model.means_.is_cuda:
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        lb = float(model.lower_bound_)
    return best, lb


def compare(n: int, d: int, k: int, iters: int, repeat: int, device: str) -> dict[str, float]:
    X = make_data(n, d, k)
    init = initial_params(X, k)
    kw = {"covariance_type": "full", "max_iter": iters, "tol": 0.0, **init}
    X_dev = torch.as_tensor(X, device=device)
    t_ours, lb_ours = time_fit(lambda: GaussianMixture(k, device=device, **kw), X_dev, repeat)
    t_sk, lb_sk = time_fit(lambda: SkGaussianMixture(k, **kw), X, repeat)
    return {"n": n, "d": d, "k": k, "iters": iters,
            "toolkit_s_per_iter": t_ours / iters, "sklearn_s_per_iter": t_sk / iters,
            "ratio": t_ours / t_sk, "lower_bound_toolkit": lb_ours, "lower_bound_sklearn": lb_sk,
            "lower_bound_rel_diff": abs(lb_ours - lb_sk) / abs(lb_sk)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--device", default="cpu", help="torch device of the toolkit model")
    parser.add_argument("--repeat", type=int, default=3, help="fits per timing (best is kept)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads for the toolkit model (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.quick:
        main_case = {"n": 20_000, "iters": 10}
        scaling = [(5_000, 10), (20_000, 10)]
        repeat = 1
    else:
        main_case = {"n": 100_000, "iters": 50}
        scaling = [(10_000, 50), (100_000, 20), (1_000_000, 5)]
        repeat = args.repeat
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__},"
          f" {platform.processor() or platform.machine()}, device={args.device}")
    results = {"main": compare(main_case["n"], 8, 8, main_case["iters"], repeat, args.device),
               "scaling": []}
    r = results["main"]
    print(f"\nn={r['n']:,} d=8 k=8 full, {r['iters']} iterations, tol=0, same init:")
    print(f"  toolkit  {r['toolkit_s_per_iter'] * 1e3:9.2f} ms/iter   lower bound "
          f"{r['lower_bound_toolkit']:.12f}")
    print(f"  sklearn  {r['sklearn_s_per_iter'] * 1e3:9.2f} ms/iter   lower bound "
          f"{r['lower_bound_sklearn']:.12f}")
    print(f"  ratio toolkit/sklearn = {r['ratio']:.3f}  (target <= 0.25);  "
          f"lower-bound rel. diff = {r['lower_bound_rel_diff']:.2e}  (target <= 1e-6)")
    print("\nscaling with n (d=8, k=8, full):")
    print(f"  {'n':>10} {'iters':>5} {'toolkit ms/it':>14} {'sklearn ms/it':>14} {'ratio':>7}"
          f" {'LB rel diff':>12}")
    for n, iters in scaling:
        s = compare(n, 8, 8, iters, 1 if n >= 1_000_000 else repeat, args.device)
        results["scaling"].append(s)
        print(f"  {n:>10,} {iters:>5} {s['toolkit_s_per_iter'] * 1e3:>14.2f} "
              f"{s['sklearn_s_per_iter'] * 1e3:>14.2f} {s['ratio']:>7.3f} "
              f"{s['lower_bound_rel_diff']:>12.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
