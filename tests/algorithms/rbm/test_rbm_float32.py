"""A float32 BernoulliRBM fit lands as close to the float64 fit as scikit-learn's does.

For the same data and ``random_state`` each estimator is fitted in float64 and in float32
(the data cast; both compute in the data's dtype), and the error of every fitted attribute of
the float32 fit against the float64 fit is compared with scikit-learn's, computed here on the
same data on the same machine. scripts/rbm_float32_error.py prints the same comparison at
larger sizes, and for data that float32 cannot represent exactly.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.neural_network import BernoulliRBM as SkBernoulliRBM

from toolkit.algorithms.rbm import BernoulliRBM

PARAMETERS = ("components_", "intercept_hidden_", "intercept_visible_")
N_SEEDS, N_SAMPLES, N_COMPONENTS, N_ITER = 20, 40, 16, 2
#: a parameter off by more than this (absolute) in a fit, or any h_samples_ entry, is a flip
FLIP = 1e-4


def _digits() -> np.ndarray:
    """scikit-learn's RBM test data: digits scaled to [0, 1], multiples of 1/16 (exact in
    float32, so the two fits start from the same data)."""
    X = load_digits().data
    return (X - X.min()) / (X - X.min()).max()


def _errors(estimator: type, kw: dict, X64: np.ndarray, sparse: bool
            ) -> dict[str, tuple[float, float]]:
    """attribute → (max relative, max absolute) error of ``estimator(**kw)``'s float32 fit
    against its float64 fit on the same data (dense, or CSR with ``sparse``)."""
    X32 = X64.astype(np.float32)
    if sparse:
        X64, X32 = sp.csr_matrix(X64), sp.csr_matrix(X32)
    f64, f32 = estimator(**kw).fit(X64), estimator(**kw).fit(X32)
    assert f32.components_.dtype == np.float32 and f64.components_.dtype == np.float64
    out = {}
    for name in (*PARAMETERS, "h_samples_"):
        a64 = np.asarray(getattr(f64, name))
        diff = np.abs(np.asarray(getattr(f32, name), dtype=np.float64) - a64)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(diff == 0, 0.0, diff / np.abs(a64))
        out[name] = (float(rel.max()), float(diff.max()))
    return out


def _fits(seed: int) -> dict[str, list[dict[str, tuple[float, float]]]]:
    """Errors of scikit-learn's and the toolkit's fits: N_SEEDS random_states, batch sizes 5
    and 10, dense and sparse input."""
    digits = _digits()
    out: dict[str, list] = {"sklearn": [], "toolkit": []}
    for s in range(seed, seed + N_SEEDS):
        start = np.random.RandomState(s).randint(0, len(digits) - N_SAMPLES)
        X = digits[start:start + N_SAMPLES]
        for batch_size in (5, 10):
            kw = {"n_components": N_COMPONENTS, "batch_size": batch_size, "n_iter": N_ITER,
                  "random_state": s}
            for sparse in (False, True):
                out["sklearn"].append(_errors(SkBernoulliRBM, kw, X, sparse))
                out["toolkit"].append(_errors(BernoulliRBM, kw, X, sparse))
    return out


@pytest.fixture(scope="module")
def fits(seed: int) -> dict[str, list[dict[str, tuple[float, float]]]]:
    return _fits(seed)


def _flipped(fit: dict[str, tuple[float, float]]) -> bool:
    return fit["h_samples_"][1] > 0 or max(fit[name][1] for name in PARAMETERS) > FLIP


def test_float32_states_flip_rarely(fits) -> None:
    """``h_samples_``: the float32 and float64 fits draw the same random numbers, so their
    binary states differ only where a uniform draw lands between the float32 and the float64
    probability, a gap of the order of float32's rounding (~1e-8 here): with 6,400 draws per
    fit, about 1e-4 flips per fit, and none was seen in 560 fits of either estimator (seed
    windows 0, 1, 2, 20, 40, 60, 80). A flip moves the parameters by ``learning_rate /
    batch_size`` times a probability (1e-3 and more, where rounding moves them by 1e-7), so
    the fits where either estimator flipped are left out of the rounding comparisons below;
    ours may flip in at most 2 of the 80 fits (Poisson with a mean below 0.1: P(>= 3) < 2e-4).
    """
    flipped = [_flipped(fit) for fit in fits["toolkit"]]
    assert sum(flipped) <= 2, f"float32 states flipped in {sum(flipped)} of {len(flipped)} fits"


def test_float32_parameters_are_as_accurate_as_scikit_learns(fits) -> None:
    """Every fitted parameter's float32-vs-float64 error, ours against scikit-learn's.

    Statistics over the fits where neither estimator flipped a state (at least 70 of 80), per
    attribute, toolkit / scikit-learn, measured on windows of 20 seeds starting at 0, 1, 2, 20,
    40, 60 and 80 (components_, intercept_hidden_, intercept_visible_; in brackets the update
    before this test, which rounded ``1/batch_size`` into every term and added each step to
    the parameters with a plain float32 addition):

    * max over fits of ``max_abs``: 0.58–0.74, 0.41–0.51, 0.25–0.37
      (0.84–1.16, 0.59–1.19, 0.91–1.25). Asserted <= 1.
    * median over fits of ``max_abs``: 0.78–0.84, 0.46–0.58, 0.47–0.56
      (1.00–1.07, 0.61–0.70, 1.18–1.51). Asserted <= 1.
    * median over fits of ``max_rel``: 0.67–1.28, 0.48–0.60, 0.45–1.02
      (0.78–1.36, 0.63–0.71, 5.4–10.7). Asserted <= 2.

    The absolute errors are where the arithmetic shows: the update adds to each parameter a
    step that the parameter mostly cancels over the updates, and a plain float32 addition
    loses up to half a unit in the last place of the parameter at every update (a bound that
    grows as ``(T − 1)·u·Σ|steps|`` over T updates), where Kahan's compensated summation keeps
    it to ``2u·|θ| + O(T·u²)·Σ|steps|`` (Higham 2002, §4.3); scikit-learn adds plainly.

    The relative error gets a factor 2, and only through its median, because ``max_rel`` is
    the absolute error at the entry the trajectory drove closest to 0, divided by that entry
    (digits' visible biases are sums of steps ``±lr·k/(16·batch)`` that cancel to small
    multiples of ``lr/(16·batch)``, 1/800 at batch 5; a weight can end at 1e-6). The two estimators draw different random
    numbers, so their trajectories end at different small entries: the ratio of their
    ``max_rel`` in one fit spreads over 1/20..20 for the same arithmetic, and the maximum over
    fits is decided by the one fit with the smallest entry (scikit-learn's reaches 5e8 where a
    bias cancels to 1e-17 in float64). At such entries both estimators sit at float32's floor:
    the hidden probabilities are float32 numbers (relative rounding 6e-8), which every update
    feeds into every statistic, and with every other step of our update done in float64 the
    error of a weight that ends at 1.4e-5 is still 1.8e-8 (scripts/rbm_float32_error.py and a
    replica of the update, measured). The median over 80 fits moves by up to 1.9x between seed
    windows for the same code (0.67–1.28), hence 2; the old update's 5.4–10.7 fails it.
    """
    usable = [i for i, (a, b) in enumerate(zip(fits["sklearn"], fits["toolkit"]))
              if not (_flipped(a) or _flipped(b))]
    assert len(usable) >= 70, f"only {len(usable)} of {len(fits['toolkit'])} fits unflipped"
    checks = {"max of max_abs": (1, np.max, 1.0), "median of max_abs": (1, np.median, 1.0),
              "median of max_rel": (0, np.median, 2.0)}
    report, failures = [], []
    for name in PARAMETERS:
        for label, (k, reduce, factor) in checks.items():
            ours = reduce([fits["toolkit"][i][name][k] for i in usable])
            theirs = reduce([fits["sklearn"][i][name][k] for i in usable])
            line = f"{name} {label}: {ours:.3g} vs scikit-learn {theirs:.3g} ({ours / theirs:.2f}x)"
            report.append(line)
            if not ours <= factor * theirs:
                failures.append(f"{line}, allowed {factor}x")
    assert not failures, "\n".join([*failures, "all:", *report])


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_copied_float32_fit_continues_as_the_original(how: str, seed: int) -> None:
    """The compensation (what rounding has left out of the float32 parameters so far) is part
    of the training state: a pickled or deep-copied model continues exactly as the original,
    with its own work space (a shared or stale one would change every later update)."""
    X = _digits()[:40].astype(np.float32)
    fitted = BernoulliRBM(8, batch_size=5, n_iter=2, random_state=seed).fit(X)
    assert fitted._state.compensation is not None and fitted._state.compensation.any()
    twin = pickle.loads(pickle.dumps(fitted)) if how == "pickle" else copy.deepcopy(fitted)
    for _ in range(2):
        np.testing.assert_array_equal(twin.partial_fit(X).components_,
                                      fitted.partial_fit(X).components_)
    np.testing.assert_array_equal(twin.intercept_visible_, fitted.intercept_visible_)
