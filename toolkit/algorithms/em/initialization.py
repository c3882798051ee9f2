"""Initial responsibilities for EM, drawn as scikit-learn draws them.

The random numbers come from a numpy ``RandomState`` in scikit-learn's order, so that the
same ``random_state`` gives the same start as ``sklearn.mixture.GaussianMixture`` (whose
``_initialize_parameters`` this follows). The clustering runs in numpy on the CPU: it happens
once per initialization, and scikit-learn's ``KMeans`` and ``kmeans_plusplus`` are the reference.
"""

from __future__ import annotations

import numpy as np
import torch

from toolkit.algorithms.em.core import closed_form_m_step
from toolkit.algorithms.em.params import (
    GMMParams,
    cholesky_of_precisions,
    covariances_from_precisions_cholesky,
    precisions_cholesky_from_precisions,
)

__all__ = ["INIT_PARAMS", "MAX_REPEATED_ROWS", "initial_parameters", "initial_responsibilities",
           "parameters_from_responsibilities"]

INIT_PARAMS = ("kmeans", "k-means++", "random", "random_from_data")

#: The most rows the start repeats for integer sample weights (their sum); heavier weights are
#: drawn once per row, so that a histogram's counts never allocate one row per count.
MAX_REPEATED_ROWS = 1 << 20


def initial_responsibilities(X: torch.Tensor, n_components: int, init_params: str,
                             sample_weight: torch.Tensor | None,
                             random_state: np.random.RandomState) -> torch.Tensor:
    """Responsibilities (n_samples, n_components) that start EM, as in scikit-learn.

    - ``"kmeans"``: one-hot labels of :class:`sklearn.cluster.KMeans` (``n_init=1``);
    - ``"k-means++"``: one-hot rows at the ``k`` seeds of
      :func:`sklearn.cluster.kmeans_plusplus` (Arthur & Vassilvitskii 2007,
      https://dl.acm.org/doi/10.5555/1283383.1283494), the other rows all zeros;
    - ``"random"``: uniform random rows normalized to sum to 1;
    - ``"random_from_data"``: one-hot rows at ``k`` distinct random samples.

    Integer sample weights are repeated rows, the start included: the draw is made for the
    rows repeated in place (row ``i`` ``w_i`` times, as ``np.repeat`` orders them), and row
    ``i`` gets the sum of its copies' responsibilities divided by ``w_i``. The weighted
    M-step of these responsibilities is then the M-step of the repeated rows, and the same
    ``random_state`` gives a weighted fit and a fit of the repeated rows the same start
    (up to one rounding). Above :data:`MAX_REPEATED_ROWS` copies, and for weights that are
    not all integers, the draw is made once per row instead: the weights go to the
    clustering (``"kmeans"``, ``"k-means++"``) and make ``"random_from_data"`` draw samples
    with probability proportional to their weight; ``"random"`` draws one row of
    responsibilities per sample. The M-step of these responsibilities gives the initial
    parameters.

    Args:
        X: (n_samples, n_features) data.
        n_components: number of components ``k``.
        init_params: one of :data:`INIT_PARAMS`.
        sample_weight: (n_samples,) or ``None``.
        random_state: the numpy ``RandomState`` to draw from (advanced in place).

    Returns:
        (n_samples, n_components) tensor like ``X``.
    """
    n, k = X.shape[0], n_components
    X_np = X.cpu().numpy()
    sw = None if sample_weight is None else sample_weight.cpu().numpy()
    counts = _repeat_counts(sw)
    if counts is not None:  # the start of the repeated rows, summed back per row
        copies = _draw(np.repeat(X_np, counts, axis=0), k, init_params, None, random_state)
        resp = np.zeros((n, k), dtype=X_np.dtype)
        np.add.at(resp, np.repeat(np.arange(n), counts), copies)
        weighed = counts > 0
        resp[weighed] /= counts[weighed, np.newaxis]
        return torch.as_tensor(resp, device=X.device)
    return torch.as_tensor(_draw(X_np, k, init_params, sw, random_state), device=X.device)


def _repeat_counts(sample_weight: np.ndarray | None) -> np.ndarray | None:
    """The weights as repeat counts when they are all integers and their sum is at most
    :data:`MAX_REPEATED_ROWS`; else ``None`` (no weights, or the per-row draw)."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if not np.array_equal(w, np.floor(w)) or w.sum() > MAX_REPEATED_ROWS:
        return None
    return w.astype(np.int64)


def _draw(X_np: np.ndarray, k: int, init_params: str, sw: np.ndarray | None,
          random_state: np.random.RandomState) -> np.ndarray:
    """scikit-learn's draw of initial responsibilities for the rows ``X_np`` (numpy)."""
    n = X_np.shape[0]
    resp = np.zeros((n, k), dtype=X_np.dtype)
    if init_params == "kmeans":
        from sklearn.cluster import KMeans

        labels = KMeans(n_clusters=k, n_init=1, random_state=random_state).fit(
            X_np, sample_weight=sw).labels_
        resp[np.arange(n), labels] = 1
    elif init_params == "random":
        resp = random_state.uniform(size=(n, k)).astype(X_np.dtype)
        resp /= resp.sum(axis=1)[:, np.newaxis]
    elif init_params == "random_from_data":
        p = None if sw is None else sw / sw.sum()
        indices = random_state.choice(n, size=k, replace=False, p=p)
        resp[indices, np.arange(k)] = 1
    else:
        from sklearn.cluster import kmeans_plusplus

        _, indices = kmeans_plusplus(X_np, k, sample_weight=sw, random_state=random_state)
        resp[indices, np.arange(k)] = 1
    return resp


def initial_parameters(X: torch.Tensor, n_components: int, init_params: str,
                       covariance_type: str, reg_covar: float,
                       sample_weight: torch.Tensor | None, random_state: np.random.RandomState,
                       weights_init: torch.Tensor | None = None,
                       means_init: torch.Tensor | None = None,
                       precisions_init: torch.Tensor | None = None) -> GMMParams:
    """The starting parameters: the user's ``*_init`` where given, the rest from one M-step.

    As in scikit-learn's ``GaussianMixture._initialize``: unless all three ``*_init`` are
    given, :func:`initial_responsibilities` are drawn and passed to
    :func:`parameters_from_responsibilities`; with all three given nothing is drawn or estimated.
    """
    resp = None
    if weights_init is None or means_init is None or precisions_init is None:
        resp = initial_responsibilities(X, n_components, init_params, sample_weight,
                                        random_state)
    return parameters_from_responsibilities(X, resp, covariance_type, reg_covar, sample_weight,
                                            weights_init, means_init, precisions_init)


def parameters_from_responsibilities(X: torch.Tensor, resp: torch.Tensor | None,
                                     covariance_type: str, reg_covar: float,
                                     sample_weight: torch.Tensor | None = None,
                                     weights_init: torch.Tensor | None = None,
                                     means_init: torch.Tensor | None = None,
                                     precisions_init: torch.Tensor | None = None) -> GMMParams:
    """Parameters from responsibilities ``resp`` (n_samples, n_components) by one M-step, the
    user's ``*_init`` taking precedence (``resp`` may be ``None`` when all three are given).

    The weights are ``N_k / n`` (``N_k / Σ w`` with sample weights), not renormalized, as in
    scikit-learn. ``precisions_init`` (checked tensors, in scikit-learn's shapes) gives the
    precision factors and, from them, the covariances.

    The parameters are computed and returned in float64 whatever ``X``'s dtype: a float32 start
    would already differ from scikit-learn's float64 one by ``~u·κ`` in an ill-conditioned
    covariance.
    """
    ct = covariance_type
    f64 = torch.float64
    weights = means = cov = None
    sw = None if sample_weight is None else sample_weight.to(f64)
    if resp is not None:
        resp = resp.to(f64)
        p = closed_form_m_step(X.to(f64), torch.log(resp), ct, reg_covar, sw)
        rw = resp if sw is None else resp * sw[:, None]
        nk = rw.sum(0) + 10 * torch.finfo(X.dtype).eps
        total = X.shape[0] if sw is None else sw.sum()
        weights, means, cov = nk / total, p.means, p.covariances
    if weights_init is not None:
        weights = weights_init.to(f64)
    if means_init is not None:
        means = means_init.to(f64)
    if precisions_init is None:
        prec_chol = cholesky_of_precisions(cov, ct)
    else:
        prec_chol = precisions_cholesky_from_precisions(precisions_init.to(f64), ct)
        cov = covariances_from_precisions_cholesky(prec_chol, ct)
    return GMMParams(weights, means, cov, prec_chol)
