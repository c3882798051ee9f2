"""float32 evaluation as accurate as scikit-learn's own float32 evaluation of the same mixture.

Each draw is an ill-conditioned, offset mixture (condition numbers 1 to 1e6, means up to 100
from the origin, every covariance type) and 20,000 points from it. Its float64 parameters and
points are rounded to float32 once and handed to both implementations, which then evaluate
``score_samples`` and ``predict_proba``. The errors are measured two ways:

- **against the float64 mixture** (the measure of issue 35): the rounding of the inputs, which
  both implementations share, plus each one's own arithmetic. The mean error must not exceed
  scikit-learn's: the arithmetic adds an error that is independent of the shared part, and by
  Jensen's inequality ``E|a + b| >= |a|`` for ``b`` of mean zero, so scikit-learn's expected
  error is at least the shared part that ours nearly equals. Measured over 400 draws, under the
  default kernels and under CI's second-pass kernels, ours/scikit-learn's was 0.89 at worst.
  The *max* error is one point's, and where the shared rounding decides it (well-conditioned
  mixtures) the two are equal up to that point's luck: up to 1.51x over those 400 draws (the
  99th percentile 0.96), so it is bounded at 2x only.
- **against a float64 evaluation of the rounded inputs**, which leaves each implementation's
  own arithmetic: ours must be at least as accurate as scikit-learn's, max and mean (measured
  at worst 0.58x and 0.80x for ``score_samples``). For ``predict_proba`` the float32 result's
  own rounding (``u·p``, u = 2⁻²⁴), which no float32 answer avoids, is discounted first: beyond
  it ours never exceeded scikit-learn's (equal where both underflow to 0).

Before issue 28's fix, our float32 evaluation formed ``‖x − μ‖²`` as an expanded quadratic
form in float32, and issue 35 measured its max error at 2.2e-2 nats against scikit-learn's
6.8e-4 on such a mixture (condition number 5.5e5, offsets 4, 3e5 points).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import special_ortho_group
from sklearn.mixture import GaussianMixture as SkGM

from toolkit.algorithms.em import GaussianMixture

N_SAMPLES, N_FEATURES, N_COMPONENTS = 20_000, 6, 3
U32 = 2.0 ** -24  # float32's unit roundoff
TINY = float(np.finfo(np.float32).smallest_subnormal)
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")


def draw_mixture(rng: np.random.Generator, covariance_type: str
                 ) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Points and float64 parameters (scikit-learn's shapes) of an ill-conditioned mixture."""
    d, k = N_FEATURES, N_COMPONENTS
    log_cond, log_offset = rng.uniform(0, 6), rng.uniform(0, 2)
    spread = lambda: rng.permutation(np.logspace(0, log_cond, d))  # noqa: E731
    rotate = lambda: special_ortho_group.rvs(d, random_state=rng)  # noqa: E731
    if covariance_type == "full":
        covs = np.stack([(q * spread()) @ q.T for q in (rotate() for _ in range(k))])
    elif covariance_type == "tied":
        q = rotate()
        covs = np.stack([(q * spread()) @ q.T] * k)
    elif covariance_type == "diag":
        covs = np.stack([np.diag(spread()) for _ in range(k)])
    else:
        covs = np.stack([np.eye(d) * 10 ** rng.uniform(0, log_cond) for _ in range(k)])
    means = rng.normal(size=(k, d)) * 10 ** log_offset
    weights = rng.dirichlet(np.full(k, 3.0))
    chol = np.linalg.cholesky(covs)
    labels = rng.choice(k, N_SAMPLES, p=weights)
    X = means[labels] + np.einsum("nij,nj->ni", chol[labels], rng.normal(size=(N_SAMPLES, d)))
    prec_chol = np.linalg.inv(chol).transpose(0, 2, 1)  # scikit-learn's precisions_cholesky_
    if covariance_type == "full":
        return X, (weights, means, covs, prec_chol)
    if covariance_type == "tied":
        return X, (weights, means, covs[0], prec_chol[0])
    diag = lambda a: np.diagonal(a, axis1=1, axis2=2).copy()  # noqa: E731
    if covariance_type == "diag":
        return X, (weights, means, diag(covs), diag(prec_chol))
    return X, (weights, means, covs[:, 0, 0].copy(), prec_chol[:, 0, 0].copy())


def fitted(model, covariance_type: str, params: tuple[np.ndarray, ...], dtype):
    """``model`` with the fitted attributes of ``params`` in ``dtype``, as a fit leaves them."""
    names = ("weights_", "means_", "covariances_", "precisions_cholesky_")
    for name, value in zip(names, params):
        setattr(model, name, np.asarray(value, dtype=dtype))
    pc = model.precisions_cholesky_
    model.precisions_ = pc @ np.swapaxes(pc, -1, -2) if covariance_type in ("full", "tied") \
        else pc ** 2
    model.n_features_in_ = N_FEATURES
    return model


@pytest.mark.parametrize("draw", range(32))
def test_float32_evaluation_is_as_accurate_as_scikit_learns(draw: int, seed: int) -> None:
    covariance_type = COVARIANCE_TYPES[draw % 4]
    X, params = draw_mixture(np.random.default_rng([draw, seed]), covariance_type)
    X32 = X.astype(np.float32)
    rounded = tuple(np.asarray(p, np.float32).astype(np.float64) for p in params)

    def make(cls, p, dtype):
        return fitted(cls(N_COMPONENTS, covariance_type=covariance_type), covariance_type, p,
                      dtype)

    exact, of_rounded = make(SkGM, params, np.float64), make(SkGM, rounded, np.float64)
    theirs, ours = make(SkGM, params, np.float32), make(GaussianMixture, params, np.float32)
    score = {name: np.asarray(m.score_samples(X32), np.float64)
             for name, m in (("theirs", theirs), ("ours", ours))}
    proba = {name: np.asarray(m.predict_proba(X32), np.float64)
             for name, m in (("theirs", theirs), ("ours", ours))}

    # against the float64 mixture: the inputs' rounding (shared) plus each one's arithmetic
    truth = exact.score_samples(X)
    err = {name: np.abs(s - truth) for name, s in score.items()}
    assert err["ours"].mean() <= err["theirs"].mean(), (err["ours"].mean(), err["theirs"].mean())
    assert err["ours"].max() <= 2 * err["theirs"].max(), (err["ours"].max(), err["theirs"].max())

    # against float64 on the rounded inputs: each implementation's own arithmetic
    X_rounded = X32.astype(np.float64)
    truth = of_rounded.score_samples(X_rounded)
    err = {name: np.abs(s - truth) for name, s in score.items()}
    assert err["ours"].max() <= err["theirs"].max(), (err["ours"].max(), err["theirs"].max())
    assert err["ours"].mean() <= err["theirs"].mean(), (err["ours"].mean(), err["theirs"].mean())
    truth = of_rounded.predict_proba(X_rounded)
    beyond_rounding = np.abs(proba["ours"] - truth) - U32 * truth
    theirs_max = np.abs(proba["theirs"] - truth).max()
    assert beyond_rounding.max() <= theirs_max + TINY, (beyond_rounding.max(), theirs_max)
