"""Datasets, generated or bundled with scikit-learn (nothing is downloaded), as torch tensors
(features in ``dtype``, labels ``int64``); the same ``seed`` gives the same data.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from toolkit._utils.array_validation import as_tensor

__all__ = ["MIXTURE_2D", "Dataset", "MixtureTruth", "bars_and_stripes", "binarized_digits",
           "digits", "empirical_nll", "gaussian_mixture", "iris", "train_test_split", "two_moons"]


class Dataset(NamedTuple):
    """Features ``X`` (n_samples, n_features) and integer labels ``y`` (n_samples,)."""

    X: torch.Tensor
    y: torch.Tensor


class MixtureTruth(NamedTuple):
    """Parameters of a Gaussian mixture: weights (k,), means (k, d), covariances (k, d, d)."""

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor


#: A 2-D, 3-component mixture with unequal weights, overlapping and correlated components.
MIXTURE_2D = MixtureTruth(
    weights=torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64),
    means=torch.tensor([[0.0, 0.0], [3.0, 3.0], [-3.0, 2.5]], dtype=torch.float64),
    covariances=torch.tensor([[[1.0, 0.6], [0.6, 1.0]], [[0.8, -0.3], [-0.3, 0.5]],
                              [[0.4, 0.0], [0.0, 1.5]]], dtype=torch.float64))


def _generator(seed: int | None) -> torch.Generator:
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__} {seed!r}")
    g = torch.Generator()
    g.seed() if seed is None else g.manual_seed(seed)
    return g


def gaussian_mixture(n_samples: int, truth: MixtureTruth = MIXTURE_2D, *, seed: int | None = 0,
                     dtype: torch.dtype = torch.float64) -> Dataset:
    """``n_samples`` points of a Gaussian mixture, ``y`` the component of each:
    ``x = mean + cholesky(covariance) z``, ``z ~ N(0, I)``."""
    if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 1:
        raise ValueError(f"gaussian_mixture: n_samples must be a positive int, got {n_samples!r}")
    weights, means, covs = (torch.as_tensor(t, dtype=torch.float64) for t in truth)
    k, d = means.shape
    if weights.shape != (k,) or covs.shape != (k, d, d):
        raise ValueError(f"gaussian_mixture: truth must have weights ({k},), means ({k}, {d}) and "
                         f"covariances ({k}, {d}, {d}); got {tuple(weights.shape)}, "
                         f"{tuple(means.shape)}, {tuple(covs.shape)}")
    if (weights < 0).any() or not torch.isclose(weights.sum(), torch.tensor(1.0, dtype=torch.float64)):
        raise ValueError(f"gaussian_mixture: weights must be >= 0 and sum to 1, got {weights.tolist()}")
    g = _generator(seed)
    labels = torch.multinomial(weights, n_samples, replacement=True, generator=g)
    chol = torch.linalg.cholesky(covs)
    z = torch.randn(n_samples, d, generator=g, dtype=torch.float64)
    X = means[labels] + torch.einsum("nij,nj->ni", chol[labels], z)
    return Dataset(X.to(dtype), labels)


def iris(dtype: torch.dtype = torch.float64) -> Dataset:
    """Fisher's iris (150 × 4, 3 classes), bundled with scikit-learn."""
    from sklearn.datasets import load_iris

    data = load_iris()
    return Dataset(torch.as_tensor(data.data, dtype=dtype), torch.as_tensor(data.target))


def digits(dtype: torch.dtype = torch.float32) -> Dataset:
    """scikit-learn's bundled 8×8 digits (1797 × 64, 10 classes), pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    data = load_digits()
    return Dataset(torch.as_tensor(data.data / 16.0, dtype=dtype), torch.as_tensor(data.target))


def binarized_digits(threshold: float = 0.5, dtype: torch.dtype = torch.float32) -> Dataset:
    """The digits with pixels scaled to [0, 1] and thresholded: ``x > threshold`` → 1, else 0."""
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"binarized_digits: threshold must be in [0, 1), got {threshold!r}")
    X, y = digits(torch.float64)
    return Dataset((X > threshold).to(dtype), y)


def bars_and_stripes(n: int = 4, *, duplicate_constant: bool = False,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """All bars-and-stripes patterns of an ``n × n`` grid, flattened row-major: the all-0 and
    all-1 images once (30 for n = 4), or twice with ``duplicate_constant`` (32, as Shark's)."""
    if not isinstance(n, int) or not 1 <= n <= 12:
        raise ValueError(f"bars_and_stripes: n must be an int in 1..12, got {n!r}")
    codes = torch.arange(2**n)
    bits = ((codes[:, None] >> torch.arange(n - 1, -1, -1)) & 1).to(dtype)  # (2**n, n)
    bars = bits[:, :, None].expand(-1, n, n).reshape(2**n, n * n)  # row i constant = bit i
    stripes = bits[:, None, :].expand(-1, n, n).reshape(2**n, n * n)  # column j constant
    if duplicate_constant:
        return torch.cat([bars, stripes])
    return torch.cat([bars, stripes[1:-1]])  # codes 0 and 2**n - 1 are the constant images


def empirical_nll(X: Any) -> float:
    """Summed NLL of the rows of ``X`` under their empirical distribution ``p̂(x) = n_x / n``,
    ``n · H(p̂)``: the least any density model can reach on ``X`` (Gibbs' inequality).

    >>> round(empirical_nll(bars_and_stripes(4, duplicate_constant=True)), 1)
    108.1
    """
    t = as_tensor(X, where="empirical_nll", ndim=2, min_rows=1, finite=True)
    counts = torch.unique(t, dim=0, return_counts=True)[1].to(torch.float64)
    return float(-(counts * torch.log(counts / t.shape[0])).sum())


def two_moons(n_samples: int = 1000, *, noise: float = 0.1, seed: int | None = 0,
              dtype: torch.dtype = torch.float32) -> Dataset:
    """Two interleaving half circles (scikit-learn's ``make_moons``), labels 0/1."""
    from sklearn.datasets import make_moons

    if noise < 0:
        raise ValueError(f"two_moons: noise must be >= 0, got {noise!r}")
    X, y = make_moons(n_samples=n_samples, noise=noise, random_state=seed)
    return Dataset(torch.as_tensor(X, dtype=dtype), torch.as_tensor(y))


def train_test_split(data: Dataset, test_fraction: float = 0.25, *, seed: int | None = 0,
                     stratify: bool = True) -> tuple[Dataset, Dataset]:
    """Split a :class:`Dataset` into train and test parts (stratified by label by default)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"train_test_split: test_fraction must be in (0, 1), got {test_fraction!r}")
    X, y = data
    g = _generator(seed)
    y_np = y.cpu().numpy()
    groups = [np.flatnonzero(y_np == c) for c in np.unique(y_np)] if stratify else [np.arange(len(y_np))]
    test_idx, train_idx = [], []
    for idx in groups:
        perm = torch.as_tensor(idx)[torch.randperm(len(idx), generator=g)]
        n_test = round(len(idx) * test_fraction)
        test_idx.append(perm[:n_test])
        train_idx.append(perm[n_test:])
    tr, te = torch.cat(train_idx).sort().values, torch.cat(test_idx).sort().values
    return Dataset(X[tr], y[tr]), Dataset(X[te], y[te])
