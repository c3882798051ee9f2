"""How far a float32 BernoulliRBM fit lands from the float64 fit: the toolkit's and scikit-learn's.

For the same data and the same ``random_state``, each estimator is fitted once in float64 and
once in float32 (the data cast to float32; ``dtype=None``, so both estimators compute in the
data's dtype), and each fitted attribute of the float32 fit is compared with the float64 fit's:

* ``max_rel``: ``max |a32 − a64| / |a64|`` over the entries (what ``assert_allclose``'s
  ``rtol`` bounds; an entry with ``a64 = 0`` counts only if ``a32`` differs from it);
* ``max_abs``: ``max |a32 − a64|``.

Attributes: ``components_``, ``intercept_hidden_``, ``intercept_visible_``, ``h_samples_``
(0/1 states: an error there is a chain that flipped a state), and ``transform(X)`` (which
scikit-learn's own ``test_convergence_dtype_consistency`` also checks). The float32 and
float64 fits of one estimator draw the same random numbers, so until a sampled state flips
(a uniform draw landing between the float32 and the float64 probability, which happens with
a probability of the order of the rounding error), the whole difference is rounding. A fit in
which a state flipped (``h_samples_`` differs, or a parameter is off by more than ``--flip``
in absolute value: one flipped state moves an update by ``learning_rate / batch_size`` times a
probability, 1e-3 or more, where rounding moves it by 1e-7) is counted apart, and a seed where
either estimator flipped is left out of the rounding statistics of both.

A relative error is large where a float64 value is near 0: the visible biases of the digits are
sums of steps ``±learning_rate·k/(16·batch_size)`` that cancel to small multiples of 1/1600
(batch 5), so ``max_rel`` measures "absolute error over the smallest parameter the trajectory
ended at", and the two estimators' trajectories differ (their random numbers differ). The
``all`` table pools every configuration: the max and the 90th percentile over all fits.

Data: ``digits``, scikit-learn's 8×8 digits scaled to [0, 1] as its RBM tests scale them
(``(X − min) / max``, multiples of 1/16: exact in float32), ``--n-samples`` rows from a
random offset per seed; ``uniform``, U(0, 1) values (rounded when cast to float32, so the two
fits also start from different data). Dense arrays and CSR matrices (zeros kept sparse: half the
digits' pixels are 0; the uniform data get the same zero pattern).

Output: per data kind, format, batch size and attribute, the worst (max over seeds) and the
median error of each estimator, and the worst per-seed ratio toolkit / scikit-learn.

    python scripts/rbm_float32_error.py                 # 20 seeds, batch 5 and 10
    python scripts/rbm_float32_error.py --seeds 40 --n-iter 10 --data digits
"""

from __future__ import annotations

import argparse
import platform
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import sklearn
import torch
from sklearn.datasets import load_digits
from sklearn.neural_network import BernoulliRBM as SkRBM

from toolkit.algorithms.rbm import BernoulliRBM

ATTRIBUTES = ("components_", "intercept_hidden_", "intercept_visible_", "h_samples_",
              "transform")
#: the summaries of the [all] table: (0: max_rel, 1: max_abs; the reduction over the fits)
STATISTICS = {"max of max_abs": (1, np.max), "median of max_abs": (1, np.median),
              "median of max_rel": (0, np.median), "max of max_rel": (0, np.max)}


def errors(a32: np.ndarray, a64: np.ndarray) -> tuple[float, float]:
    """(max relative, max absolute) difference of a float32 result from the float64 one."""
    diff = np.abs(np.asarray(a32, dtype=np.float64) - a64)
    ref = np.abs(a64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / ref)
    return float(rel.max(initial=0.0)), float(diff.max(initial=0.0))


def fitted(make: Callable[[], object], X: np.ndarray | sp.csr_matrix) -> dict[str, np.ndarray]:
    """The fitted attributes (and ``transform(X)``) of a fresh estimator fitted on ``X``."""
    rbm = make().fit(X)
    out = {name: np.asarray(getattr(rbm, name)) for name in ATTRIBUTES[:-1]}
    out["transform"] = np.asarray(rbm.transform(X))
    return out


def data(kind: str, seed: int, n_samples: int) -> np.ndarray:
    digits = load_digits().data
    digits = (digits - digits.min()) / (digits - digits.min()).max()
    start = np.random.RandomState(seed).randint(0, len(digits) - n_samples)
    X = digits[start:start + n_samples]
    if kind == "uniform":
        U = np.random.RandomState(10_000 + seed).uniform(size=X.shape)
        X = np.where(X > 0, U, 0.0)
    return X


def compare(X64: np.ndarray, seed: int, batch_size: int, n_iter: int, n_components: int,
            sparse: bool) -> dict[str, dict[str, tuple[float, float]]]:
    """estimator → attribute → (max_rel, max_abs) of its float32 fit against its float64 fit."""
    X32 = X64.astype(np.float32)
    if sparse:
        X64, X32 = sp.csr_matrix(X64), sp.csr_matrix(X32)
    kw = {"n_components": n_components, "batch_size": batch_size, "n_iter": n_iter,
          "random_state": seed}
    makers = {"sklearn": lambda: SkRBM(**kw), "toolkit": lambda: BernoulliRBM(**kw)}
    out = {}
    for name, make in makers.items():
        f64, f32 = fitted(make, X64), fitted(make, X32)
        assert f32["components_"].dtype == np.float32, name
        out[name] = {a: errors(f32[a], f64[a]) for a in ATTRIBUTES}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="random_states 0..N-1 (20)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--n-iter", type=int, default=5, help="passes over the data (5)")
    parser.add_argument("--n-samples", type=int, default=100, help="rows (100)")
    parser.add_argument("--n-components", type=int, default=16, help="hidden units (16)")
    parser.add_argument("--data", choices=("digits", "uniform", "both"), default="both")
    parser.add_argument("--formats", nargs="+", choices=("dense", "sparse"),
                        default=["dense", "sparse"])
    parser.add_argument("--flip", type=float, default=1e-4,
                        help="a max_abs above this (or any h_samples_ error) is a flipped state")
    parser.add_argument("--per-seed", action="store_true", help="print every fit's errors")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    kinds = ("digits", "uniform") if args.data == "both" else (args.data,)
    pooled: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"torch {torch.__version__}, scikit-learn {sklearn.__version__}, numpy "
          f"{np.__version__}, {platform.processor() or platform.machine()}; "
          f"{args.n_samples} samples, {args.n_components} hidden, n_iter {args.n_iter}, "
          f"seeds {seeds.start}..{seeds.stop - 1}")
    for kind in kinds:
        for fmt in args.formats:
            for batch in args.batch_sizes:
                # estimator → attribute → list of (max_rel, max_abs) over unflipped seeds
                stats: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
                    lambda: defaultdict(list))
                ratios: dict[str, list[float]] = defaultdict(list)
                flipped = {"sklearn": 0, "toolkit": 0}
                for seed in seeds:
                    res = compare(data(kind, seed, args.n_samples), seed, batch, args.n_iter,
                                  args.n_components, fmt == "sparse")
                    flips = {name: r["h_samples_"][1] > 0 or
                             max(r[a][1] for a in ATTRIBUTES[:3]) > args.flip
                             for name, r in res.items()}
                    for name in res:
                        flipped[name] += flips[name]
                    if args.per_seed:
                        print(f"  seed {seed}: " + "; ".join(
                            f"{name} " + " ".join(f"{a[:12]} {r[a][0]:.2e}" for a in ATTRIBUTES)
                            + (" FLIP" if flips[name] else "") for name, r in res.items()))
                    if any(flips.values()):
                        continue
                    for name, r in res.items():
                        for a in ATTRIBUTES:
                            stats[name][a].append(r[a])
                            pooled[name][a].append(r[a])
                    for a in ATTRIBUTES:
                        sk, ours = res["sklearn"][a][0], res["toolkit"][a][0]
                        ratios[a].append(ours / sk if sk > 0 else (1.0 if ours == 0 else np.inf))
                used = len(ratios[ATTRIBUTES[0]])
                print(f"\n[{kind}, {fmt}, batch {batch}] {used} fits without a flipped state "
                      f"(flipped: sklearn {flipped['sklearn']}, toolkit {flipped['toolkit']} "
                      f"of {len(seeds)})")
                print(f"  {'attribute':<19} {'sklearn max_rel':>15} {'toolkit max_rel':>15} "
                      f"{'ratio':>6} {'median sk':>10} {'median tk':>10} {'worst seed':>10} "
                      f"{'sk max_abs':>10} {'tk max_abs':>10}")
                for a in ATTRIBUTES:
                    if not used:
                        continue
                    sk = np.array(stats["sklearn"][a])
                    tk = np.array(stats["toolkit"][a])
                    ratio = tk[:, 0].max() / sk[:, 0].max() if sk[:, 0].max() > 0 else np.nan
                    print(f"  {a:<19} {sk[:, 0].max():15.3e} {tk[:, 0].max():15.3e} "
                          f"{ratio:6.2f} {np.median(sk[:, 0]):10.2e} {np.median(tk[:, 0]):10.2e} "
                          f"{max(ratios[a]):10.2f} {sk[:, 1].max():10.2e} {tk[:, 1].max():10.2e}")
    n = len(pooled["sklearn"][ATTRIBUTES[0]])
    print(f"\n[all] {n} fits without a flipped state; toolkit / scikit-learn of each statistic "
          f"over the fits")
    print(f"  {'attribute':<19} " + " ".join(f"{h:>27}" for h in STATISTICS))
    for a in ATTRIBUTES:
        if not n:
            continue
        cells = []
        for j, reduce in STATISTICS.values():
            sk = reduce(np.array(pooled["sklearn"][a])[:, j])
            tk = reduce(np.array(pooled["toolkit"][a])[:, j])
            cells.append(f"{tk:8.2e} / {sk:8.2e} = {tk / sk if sk else np.nan:5.2f}")
        print(f"  {a:<19} " + " ".join(f"{c:>27}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
