"""The estimator against scikit-learn, and its robustness and error messages."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse
import torch
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from toolkit import BlockNotSwitchableError, disable_blocks, record_blocks, seen_blocks
from toolkit.algorithms.em import (
    BLOCK,
    COVARIANCE_TYPES,
    GaussianMixture,
    m_step,
)
from toolkit.algorithms.em.initialization import INIT_PARAMS
from toolkit.lab.data import MIXTURE_2D, gaussian_mixture, iris

from ._helpers import F64, _full_covs, _init_params


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_trajectory_matches_sklearn_from_the_same_init(ct: str, seed: int) -> None:
    """Measured: lower bounds to 7e-15 (relative), parameters and predictions to 1.4e-13."""
    X = gaussian_mixture(400, MIXTURE_2D, seed=seed + 2).X.numpy() + 5.0
    init = _init_params(X, 3, ct)
    kw = {"covariance_type": ct, "max_iter": 30, "tol": 0.0, **init}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = GaussianMixture(3, **kw).fit(X)
        ref = SkGaussianMixture(3, **kw).fit(X)
    assert len(ours.lower_bounds_) == len(ref.lower_bounds_) == 30
    np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-12)
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=0, atol=1e-11,
                                   err_msg=name)
    assert ours.n_iter_ == ref.n_iter_ and ours.converged_ == ref.converged_
    np.testing.assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-12)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-11)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-12)
    assert ours.bic(X) == pytest.approx(ref.bic(X), rel=1e-12)
    assert ours.aic(X) == pytest.approx(ref.aic(X), rel=1e-12)


def _entropy(gm: GaussianMixture, X: torch.Tensor) -> float:
    """Mean responsibility entropy ``−Σ_k r_nk log r_nk`` averaged over samples."""
    r = gm.predict_proba(X)
    return -torch.xlogy(r, r).sum(1).mean().item()


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_gradient_m_step_fit_honours_the_block(ct: str) -> None:
    """Inside disable_blocks the fit follows ∇(LL − H(r)): other means, harder responsibilities.

    Measured on iris (k-means start): max |Δμ| 0.025 (full) to 0.069 (diag); mean entropy
    0.0325 → 0.0216 nats (full); log-likelihood −1.2012 → −1.2055 (full).
    """
    X = torch.as_tensor(iris().X)
    kw = {"covariance_type": ct, "random_state": 0, "m_step": "gradient"}
    with record_blocks() as names:
        blocked = GaussianMixture(3, **kw).fit(X)
        assert seen_blocks() == (BLOCK,)
    assert names == [BLOCK]
    with disable_blocks(BLOCK):
        unblocked = GaussianMixture(3, **kw).fit(X)
    assert (blocked.means_ - unblocked.means_).abs().max() > 1e-2
    assert _entropy(unblocked, X) < 0.85 * _entropy(blocked, X)
    # the blocked fit maximizes LL, the unblocked one LL − H: it pays in log-likelihood
    assert unblocked.score(X) < blocked.score(X) - 1e-3


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_blocked_gradient_fit_reaches_the_closed_form_optimum(ct: str, seed: int) -> None:
    """With the block the gradient M-step is a generalized EM: same fixed point as EM.

    Measured from the same k-means start on the well-separated 2-D mixture: relative
    log-likelihood difference ≤ 3e-11 and max |Δμ| ≤ 3.2e-5 (the likelihood is flat there;
    closed-form EM run to tol=1e-10 still creeps toward the optimum).
    """
    X = gaussian_mixture(300, MIXTURE_2D, seed=seed).X
    kw = {"covariance_type": ct, "random_state": 0, "tol": 1e-10}
    closed = GaussianMixture(3, max_iter=500, **kw).fit(X)
    grad = GaussianMixture(3, max_iter=50, m_step="gradient", **kw).fit(X)
    assert closed.converged_ and grad.converged_
    assert abs(grad.lower_bound_ - closed.lower_bound_) < 1e-9 * abs(closed.lower_bound_)
    torch.testing.assert_close(grad.means_, closed.means_, rtol=0, atol=1e-4)
    torch.testing.assert_close(grad.weights_, closed.weights_, rtol=0, atol=1e-5)


def test_closed_form_fit_refuses_to_run_without_its_block(seed: int) -> None:
    X = gaussian_mixture(60, MIXTURE_2D, seed=seed).X
    with record_blocks() as names:
        GaussianMixture(2, random_state=seed).fit(X)
    assert names == [BLOCK]  # the closed-form M-step is the blocked maximizer
    with disable_blocks("em.*"):
        with pytest.raises(BlockNotSwitchableError,
                           match=r"GaussianMixture\.fit: the block 'em\.responsibilities' cannot "
                                 r"be switched off here \(the closed-form M-step"):
            GaussianMixture(2, random_state=seed).fit(X)
        gm = GaussianMixture(2, max_iter=0, random_state=seed).fit(X)  # no M-step: nothing to switch
    assert gm.n_iter_ == 0


def test_integer_sample_weights_equal_repeated_rows(seed: int) -> None:
    X = gaussian_mixture(120, MIXTURE_2D, seed=seed + 4).X
    counts = torch.randint(0, 4, (120,), generator=torch.Generator().manual_seed(seed))
    X_rep = torch.repeat_interleave(X, counts, dim=0)
    init = _init_params(X.numpy(), 3, "full")
    for dtype in (torch.float64, torch.float32):
        kw = {"max_iter": 50, "tol": 0.0, "dtype": dtype, **init}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            weighted = GaussianMixture(3, **kw).fit(X, sample_weight=counts)
            repeated = GaussianMixture(3, **kw).fit(X_rep)
        tol = 1e-9 if dtype == torch.float64 else 1e-4
        np.testing.assert_allclose(weighted.lower_bounds_, repeated.lower_bounds_, rtol=tol)
        torch.testing.assert_close(weighted.means_, repeated.means_, rtol=tol, atol=tol)
        torch.testing.assert_close(weighted.covariances_, repeated.covariances_, rtol=tol,
                                   atol=tol)
    # the score with weights is the weighted mean of score_samples
    assert weighted.score(X, sample_weight=counts) == pytest.approx(
        repeated.score(X_rep), rel=1e-4)


def test_n_init_keeps_the_best_and_warm_start_continues(seed: int) -> None:
    X = gaussian_mixture(300, MIXTURE_2D, seed=seed).X
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        best = GaussianMixture(3, init_params="random", n_init=4, random_state=seed + 1).fit(X)
        one = GaussianMixture(3, init_params="random", n_init=1, random_state=seed + 1).fit(X)
        assert best.lower_bound_ >= one.lower_bound_ - 1e-12
        gm = GaussianMixture(3, max_iter=2, tol=0.0, warm_start=True, random_state=seed)
        gm.fit(X)
        first = gm.lower_bounds_
        gm.fit(X)
    assert gm.n_iter_ == 2 and gm.lower_bounds_[0] >= first[-1] - 1e-12
    full = GaussianMixture(3, max_iter=4, tol=0.0, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full.fit(X)
    np.testing.assert_allclose(first + gm.lower_bounds_, full.lower_bounds_, rtol=1e-12)


def test_type_in_type_out(seed: int) -> None:
    """numpy, lists and pandas give numpy; tensors give tensors; float32 data stay float32."""
    pd = pytest.importorskip("pandas")
    X = gaussian_mixture(200, MIXTURE_2D, seed=seed).X
    attrs = ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_")
    t = GaussianMixture(3, random_state=seed).fit(X)
    assert all(isinstance(getattr(t, a), torch.Tensor) for a in attrs)
    for out in (t.predict(X), t.predict_proba(X), t.score_samples(X), *t.sample(5)):
        assert isinstance(out, torch.Tensor) and out.device == X.device
    assert isinstance(t.predict(X.numpy()), np.ndarray)  # methods follow their own input
    frame = pd.DataFrame(X.numpy(), columns=["a", "b"])
    for data in (X.numpy(), X.tolist(), frame):
        gm = GaussianMixture(3, random_state=seed).fit(data)
        assert all(isinstance(getattr(gm, a), np.ndarray) for a in attrs)
        np.testing.assert_array_equal(gm.lower_bounds_, t.lower_bounds_)
        np.testing.assert_array_equal(gm.means_, t.means_.numpy())
        for out in (gm.predict(data), gm.predict_proba(data), gm.score_samples(data),
                    gm.fit_predict(data), *gm.sample(5)):
            assert isinstance(out, np.ndarray)
        assert gm.n_features_in_ == 2 and isinstance(gm.lower_bound_, float)
    assert list(gm.feature_names_in_) == ["a", "b"]
    assert not hasattr(GaussianMixture(3, random_state=seed).fit(X.numpy()), "feature_names_in_")
    # dtype=None follows scikit-learn: float32 stays float32, everything else is float64
    f32 = GaussianMixture(3, random_state=seed).fit(X.numpy().astype(np.float32))
    assert f32.means_.dtype == np.float32 and f32.predict_proba(X.numpy()).dtype == np.float32
    assert f32.lower_bound_ == pytest.approx(t.lower_bound_, rel=1e-4)
    assert GaussianMixture(3, random_state=seed).fit(X.int()).means_.dtype == torch.float64
    for dtype in ("float32", torch.float32):
        gm = GaussianMixture(3, random_state=seed, dtype=dtype).fit(X)
        assert gm.means_.dtype == torch.float32
    assert GaussianMixture(3, dtype="float64").fit(X.float()).means_.dtype == torch.float64


def test_sample_matches_the_fitted_mixture(seed: int) -> None:
    X = gaussian_mixture(500, MIXTURE_2D, seed=seed).X
    for ct in COVARIANCE_TYPES:
        gm = GaussianMixture(3, covariance_type=ct, random_state=seed).fit(X)
        S, y = gm.sample(20000)
        S2, y2 = gm.sample(20000)
        assert S.shape == (20000, 2) and torch.equal(S, S2) and torch.equal(y, y2)
        assert torch.all(y[1:] >= y[:-1])  # grouped by component, as in scikit-learn
        freq = torch.bincount(y, minlength=3).double() / 20000
        torch.testing.assert_close(freq, gm.weights_, atol=0.015, rtol=0)
        for j in range(3):
            Sj = S[y == j]
            torch.testing.assert_close(Sj.mean(0), gm.means_[j], atol=0.08, rtol=0)
            cov_j = _full_covs(gm.covariances_, ct, 3, 2)[j]
            np.testing.assert_allclose(np.cov(Sj.numpy().T), cov_j, atol=0.1)


def test_predict_proba_rows_sum_to_one_and_predict_is_argmax(seed: int) -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=seed).X
    gm = GaussianMixture(3, random_state=seed).fit(X)
    proba = gm.predict_proba(X)
    torch.testing.assert_close(proba.sum(1), torch.ones(200, dtype=F64))
    assert torch.equal(gm.predict(X), proba.argmax(1))
    assert torch.equal(gm.fit_predict(X), gm.predict(X))
    assert gm.score(X) == pytest.approx(gm.score_samples(X).mean().item())


def test_emptied_component_gives_no_nan(seed: int) -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=seed).X
    means = torch.cat([MIXTURE_2D.means, torch.tensor([[1e4, 1e4]], dtype=F64)])
    for ct in COVARIANCE_TYPES:
        gm = GaussianMixture(4, covariance_type=ct, means_init=means, random_state=seed,
                             max_iter=50).fit(X)
        for t in (gm.weights_, gm.means_, gm.covariances_, gm.precisions_cholesky_):
            assert torch.isfinite(t).all(), ct
        assert gm.weights_.min() < 1e-10
        assert torch.isfinite(gm.score_samples(X)).all()
    log_resp = torch.log(torch.tensor([[1.0, 0.0]], dtype=F64).expand(50, 2))
    new = m_step(X[:50], log_resp)
    assert all(torch.isfinite(t).all() for t in new)


def test_lost_positive_definiteness_fails_with_advice(seed: int) -> None:
    X = torch.zeros(20, 2, dtype=F64)
    X[:, 0] = torch.linspace(0, 1, 20, dtype=F64)  # second feature constant: singular cov
    with pytest.raises(ValueError, match="decrease the number of components, increase "
                                         "reg_covar, or scale the input data"):
        GaussianMixture(2, reg_covar=0.0, random_state=seed).fit(X)
    # ... and reg_covar repairs it
    gm = GaussianMixture(2, reg_covar=1e-6, random_state=seed).fit(X)
    assert torch.isfinite(gm.covariances_).all()


def test_non_convergence_warns_with_advice(seed: int) -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=seed).X
    with pytest.warns(ConvergenceWarning, match=r"GaussianMixture\.fit: Best performing "
                      r"initialization did not converge\. Try different init parameters, or "
                      r"increase max_iter, tol, or check for degenerate data\. \(It stopped "
                      r"after max_iter=2 iterations with tol=0\.001"):
        gm = GaussianMixture(3, max_iter=2, random_state=seed).fit(X)
    assert not gm.converged_ and gm.n_iter_ == 2


def test_bad_inputs_name_the_argument(seed: int) -> None:
    X = gaussian_mixture(50, MIXTURE_2D, seed=seed).X
    gm = GaussianMixture(3)
    bad_nan = X.clone()
    bad_nan[3, 1] = float("nan")
    bad_inf = X.clone()
    bad_inf[0, 0] = float("inf")
    nan_or_inf = r"GaussianMixture\.fit: X contains NaN or infinity; remove or impute"
    for data, error, match in [
        (bad_nan, ValueError, nan_or_inf),
        (bad_inf.numpy(), ValueError, nan_or_inf),
        (X[:, 0], ValueError, r"GaussianMixture\.fit: X must be 2-D \(n_samples, n_features\), "
                              r"got shape \(50,\); Reshape your data"),
        (X[:2], ValueError, "n_samples >= n_components, got n_samples=2"),
        (X[:1], ValueError, r"X must have at least 2 samples, got n_samples=1 \(shape=\(1, 2\)\)"),
        ({"not": "data"}, TypeError, r"GaussianMixture\.fit: X must be an array-like of numbers"),
        (np.array([[1.0, {}], [2.0, 3.0]], dtype=object), TypeError,
         "X must be an array-like of numbers or a tensor \\(float\\(\\) argument must be"),
        (np.zeros((50, 0)), ValueError, r"X must have at least one feature, got 0 feature\(s\) "
                                        r"\(shape=\(50, 0\)\) while a minimum of 1 is required"),
        (np.ones((5, 2), dtype=complex), ValueError, "Complex data not supported"),
        (torch.ones(5, 2, dtype=torch.complex64), ValueError, "Complex data not supported"),
        (scipy.sparse.csr_matrix(np.ones((5, 2))), TypeError,
         r"X must be dense; sparse input is not supported \(got csr_matrix\)"),
    ]:
        with pytest.raises(error, match=match):
            gm.fit(data)
    for weights, match in [
        (-torch.ones(50), r"GaussianMixture\.fit: sample_weight must be >= 0"),
        (np.ones(3), r"sample_weight must have shape \(50,\), got \(3,\)"),
        (np.zeros(50), "sample_weight must have a positive sum, got all zeros"),
        (np.r_[1.0, 1.0, np.zeros(48)],
         "sample_weight must be positive on at least n_components=3 samples, got 2"),
        (np.full(50, np.nan), "sample_weight contains NaN or infinity"),
    ]:
        with pytest.raises(ValueError, match=match):
            gm.fit(X, sample_weight=weights)
    for kwargs, error, match in [
        ({"covariance_type": "banded"}, ValueError, "covariance_type must be one of 'full'"),
        ({"init_params": "kmeans++"}, ValueError,
         "init_params must be one of 'kmeans', 'k-means\\+\\+', 'random', 'random_from_data'"),
        ({"m_step": "newton"}, ValueError, "m_step must be one of 'closed_form', 'gradient'"),
        ({"n_init": 0}, ValueError, "GaussianMixture: n_init must be an int >= 1, got 0"),
        ({"n_init": 1.0}, TypeError, "GaussianMixture: n_init must be an int >= 1, got 1.0"),
        ({"max_iter": -1}, ValueError, "max_iter must be an int >= 0, got -1"),
        ({"tol": -1.0}, ValueError, "tol must be a number >= 0, got -1.0"),
        ({"tol": "small"}, TypeError, "tol must be a number >= 0, got 'small'"),
        ({"reg_covar": -1e-6}, ValueError, "reg_covar must be a number >= 0"),
        ({"warm_start": 1}, TypeError, "warm_start must be a bool, got 1"),
        ({"verbose": -1}, ValueError, "verbose must be an int >= 0 or a bool, got -1"),
        ({"verbose_interval": 0}, ValueError, "verbose_interval must be an int >= 1, got 0"),
        ({"dtype": torch.int64}, ValueError, "dtype must be None or one of 'float32', 'float64', "
                                             "torch.float32, torch.float64, got dtype torch.int64"),
        ({"dtype": "float16"}, ValueError, "dtype must be None or one of 'float32'"),
        ({"dtype": 64}, TypeError, "dtype must be None or one of 'float32'"),
        ({"device": 3}, TypeError, "device must be None, 'auto', a string such as 'cpu'"),
        ({"weights_init": [0.5, 0.5]}, ValueError, r"GaussianMixture\.fit: weights_init: The "
         r"parameter 'weights' should have the shape of \(3,\), but got \(2,\)$"),
        ({"weights_init": [0.5, 0.4, 0.4]}, ValueError, r"weights_init: The parameter 'weights' "
         r"should be normalized, but got sum\(weights\) = 1\.30000$"),
        ({"weights_init": [-0.5, 0.4, 1.1]}, ValueError, r"weights_init: The parameter 'weights' "
         r"should be in the range \[0, 1\], but got min value -0\.50000, max value 1\.10000$"),
        ({"weights_init": [np.nan, 0.5, 0.5]}, ValueError, "weights_init contains NaN"),
        ({"means_init": np.zeros((3, 3))}, ValueError, r"means_init: The parameter 'means' "
         r"should have the shape of \(3, 2\), but got \(3, 3\)$"),
        ({"precisions_init": np.ones((3, 2))}, ValueError, r"precisions_init: The parameter "
         r"'full precision' should have the shape of \(3, 2, 2\), but got \(3, 2\)$"),
        ({"precisions_init": -np.ones((3, 2)), "covariance_type": "diag"}, ValueError,
         r"GaussianMixture\.fit: precisions_init: 'diag precision' should be positive$"),
        ({"precisions_init": np.stack([np.diag([1.0, -1.0])] * 3)}, ValueError,
         r"precisions_init: 'full precision' should be symmetric, positive-definite$"),
        ({"precisions_init": np.array([[1.0, 0.5], [0.0, 1.0]]), "covariance_type": "tied"},
         ValueError, r"precisions_init: 'tied precision' should be symmetric, positive-definite"),
        ({"random_state": "seed"}, TypeError,
         r"random_state must be None or an int in \[0, 4294967295\] or a numpy RandomState or "
         r"Generator or a torch.Generator, got 'seed'"),
        ({"random_state": -1}, ValueError, r"random_state must be None or an int in \[0, "),
    ]:
        with pytest.raises(error, match=match):
            GaussianMixture(3, **kwargs).fit(X)
    with pytest.raises(ValueError, match="n_components must be an int >= 1, got 0"):
        GaussianMixture(0).fit(X)
    not_fitted = (r"This GaussianMixture instance is not fitted yet\. Call 'fit' with "
                  r"appropriate arguments before using this estimator\.$")
    for method in ("predict", "predict_proba", "score_samples", "score", "bic", "aic"):
        with pytest.raises(NotFittedError, match=rf"GaussianMixture\.{method}: {not_fitted}"):
            getattr(GaussianMixture(3), method)(X)
    with pytest.raises(NotFittedError, match=rf"GaussianMixture\.sample: {not_fitted}"):
        GaussianMixture(3).sample()
    fitted = GaussianMixture(3, random_state=seed).fit(X)
    with pytest.raises(ValueError, match=r"GaussianMixture\.score_samples: X has 3 features, but "
                                         r"GaussianMixture is expecting 2 features as input"):
        fitted.score_samples(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"GaussianMixture\.predict: X must be 2-D"):
        fitted.predict(X[0])
    with pytest.raises(ValueError, match=r"GaussianMixture\.sample: Invalid value for 'n_samples': "
                                         r"the sampling requires at least one sample, got 0"):
        fitted.sample(0)
    with pytest.raises(TypeError, match=r"GaussianMixture\.sample: n_samples must be an int >= 1, "
                                        r"got 1\.5"):
        fitted.sample(1.5)


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_float32_follows_float64_sklearn_on_offset_data(ct: str, seed: int) -> None:
    """float32 runs the centered plain e_step/m_step: no cancellation for data far from 0."""
    X = gaussian_mixture(300, MIXTURE_2D, seed=seed + 2).X.numpy() + 100.0
    init = _init_params(X, 3, ct)
    kw = {"covariance_type": ct, "max_iter": 30, "tol": 0.0, **init}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = GaussianMixture(3, dtype=torch.float32, **kw).fit(X)
        ref = SkGaussianMixture(3, **kw).fit(X)
    assert ours.means_.dtype == np.float32
    # float32 rounding (~1e-7) is amplified where the EM trajectory moves fast
    np.testing.assert_allclose(ours.lower_bounds_, ref.lower_bounds_, rtol=1e-4)
    assert ours.lower_bounds_[-1] == pytest.approx(ref.lower_bounds_[-1], rel=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_come_back_on_their_device(seed: int) -> None:
    X = gaussian_mixture(200, MIXTURE_2D, seed=seed).X
    cpu = GaussianMixture(3, random_state=seed).fit(X)
    for device in ("cuda", "cpu"):  # where to compute; the results follow the data
        gm = GaussianMixture(3, random_state=seed, device=device).fit(X.cuda())
        assert gm.means_.is_cuda and gm.predict(X.cuda()).is_cuda
        assert gm.sample(3)[0].is_cuda and isinstance(gm.predict(X.numpy()), np.ndarray)
        np.testing.assert_allclose(gm.lower_bounds_, cpu.lower_bounds_, rtol=1e-10)


def test_all_three_inits_estimate_nothing_at_the_start(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """With weights, means and precisions given nothing is drawn or estimated at the start (as
    scikit-learn's test_gaussian_mixture_all_init_does_not_estimate_gaussian_parameters
    checks with its own private function); with one of them missing the start is estimated."""
    from toolkit.algorithms.em import initialization

    calls: list[str] = []
    for name in ("initial_responsibilities", "closed_form_m_step"):
        real = getattr(initialization, name)
        monkeypatch.setattr(initialization, name, lambda *a, _f=real, _n=name, **k: (
            calls.append(_n), _f(*a, **k))[1])
    X = gaussian_mixture(100, MIXTURE_2D, seed=seed).X.numpy()
    init = _init_params(X, 3, "full")
    GaussianMixture(3, max_iter=3, tol=0.0, **init).fit(X)
    assert calls == []
    GaussianMixture(3, max_iter=3, tol=0.0, **{**init, "means_init": None}).fit(X)
    assert calls == ["initial_responsibilities", "closed_form_m_step"]


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_private_hooks_match_sklearns(ct: str, seed: int) -> None:
    """_initialize(X, resp) and _set_parameters, the private hooks scikit-learn's own tests call,
    set what scikit-learn's set (the number of components is resp's)."""
    X = gaussian_mixture(60, MIXTURE_2D, seed=seed + 1).X.numpy()
    rng = np.random.RandomState(seed)
    resp = rng.uniform(size=(60, 4))
    resp /= resp.sum(1, keepdims=True)
    names = ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_")
    for kwargs in ({}, {"precisions_init": _init_params(X, 4, ct)["precisions_init"]}):
        ours, ref = GaussianMixture(covariance_type=ct, **kwargs), SkGaussianMixture(
            covariance_type=ct, **kwargs)
        ours._initialize(X, resp)
        ref._initialize(X, resp)
        for name in names[:4]:  # (scikit-learn sets no covariances_ from precisions_init)
            if hasattr(ref, name):
                np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-10,
                                           atol=1e-12, err_msg=name)
        ours, ref = GaussianMixture(covariance_type=ct), SkGaussianMixture(covariance_type=ct)
        params = tuple(getattr(ref.fit(X) if not hasattr(ref, "weights_") else ref, name)
                       for name in names[:4])
        ours._set_parameters(params)
        for name in names:
            np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=1e-12,
                                       err_msg=name)


@pytest.mark.parametrize("init_params", INIT_PARAMS)
def test_integer_sample_weights_equal_repeated_rows_from_the_drawn_start(
        init_params: str, seed: int) -> None:
    """Issue 73: integer weights are repeated rows, the drawn start included.

    The start is drawn for the rows as they would be repeated (``np.repeat`` order), so the
    weighted fit and the fit of the repeated rows start from the same parameters (up to one
    rounding of the responsibilities) and then take the same EM steps.
    """
    X = gaussian_mixture(90, MIXTURE_2D, seed=seed + 7).X
    counts = torch.randint(0, 4, (90,), generator=torch.Generator().manual_seed(seed))
    counts[:3] = 1  # at least n_components rows weigh something, whatever the seed
    X_rep = torch.repeat_interleave(X, counts, dim=0)
    kw = {"init_params": init_params, "max_iter": 25, "tol": 0.0,
          "random_state": seed}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = GaussianMixture(3, **kw).fit(X, sample_weight=counts)
        repeated = GaussianMixture(3, **kw).fit(X_rep)
    np.testing.assert_allclose(weighted.lower_bounds_, repeated.lower_bounds_, rtol=1e-9)
    for name in ("weights_", "means_", "covariances_"):
        torch.testing.assert_close(getattr(weighted, name), getattr(repeated, name),
                                   rtol=1e-7, atol=1e-9, msg=name)
