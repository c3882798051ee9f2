"""Covariance / precision conversions and the unconstrained parametrization."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit.algorithms.em import (
    COVARIANCE_TYPES,
    from_unconstrained,
    precisions_cholesky_from_covariances,
    to_unconstrained,
)
from toolkit.algorithms.em.params import (
    covariances_from_precisions_cholesky,
    precisions_cholesky_from_precisions,
)

from ._helpers import F64, _random_params


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_conversions_round_trip_and_match_numpy(ct: str, seed: int) -> None:
    p = _random_params(3, 4, ct, seed=seed + 1)
    U = p.precisions_cholesky
    if ct in ("full", "tied"):
        assert torch.equal(U, torch.triu(U))
        precisions = U @ U.mT
        np.testing.assert_allclose(precisions.numpy(), np.linalg.inv(p.covariances.numpy()),
                                   rtol=1e-10)
    else:
        precisions = U.square()
        np.testing.assert_allclose(precisions.numpy(), 1.0 / p.covariances.numpy(), rtol=1e-12)
    # from the precisions (scikit-learn's precisions_init) back to the same factor
    torch.testing.assert_close(precisions_cholesky_from_precisions(precisions, ct), U,
                               rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(covariances_from_precisions_cholesky(U, ct), p.covariances,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ct", COVARIANCE_TYPES)
def test_unconstrained_parametrization_round_trips(ct: str, seed: int) -> None:
    p = _random_params(3, 2, ct, seed=seed + 3)
    theta = to_unconstrained(p, ct)
    assert all(t.requires_grad and t.is_leaf for t in theta)
    weights, means, U = from_unconstrained(theta, ct)
    torch.testing.assert_close(weights, p.weights, rtol=1e-12, atol=0)
    torch.testing.assert_close(means, p.means, rtol=0, atol=0)
    torch.testing.assert_close(U, p.precisions_cholesky, rtol=1e-12, atol=1e-14)
    # any real values give valid parameters: weights on the simplex, a positive diagonal
    wild = [torch.randn_like(t) * 5 for t in theta]
    weights, _, U = from_unconstrained(wild, ct)
    assert torch.isclose(weights.sum(), torch.ones((), dtype=F64)) and (weights > 0).all()
    diag = torch.diagonal(U, dim1=-2, dim2=-1) if ct in ("full", "tied") else U
    assert (diag > 0).all()


def test_singular_covariances_fail_with_advice() -> None:
    with pytest.raises(ValueError, match="float64"):
        precisions_cholesky_from_covariances(torch.zeros(1, 2, 2), "full")
    with pytest.raises(ValueError, match=r"^precisions_cholesky_from_covariances: covariances "
                                         r"must be positive definite and finite: .*increase "
                                         r"reg_covar"):
        precisions_cholesky_from_covariances(torch.zeros(1, 2, dtype=F64), "diag")
    with pytest.raises(ValueError, match=r"^precisions_cholesky_from_covariances: covariances "
                                         r"must have shape \(k, d\) for covariance_type='diag', "
                                         r"got \(2,\)"):
        precisions_cholesky_from_covariances(torch.zeros(2, dtype=F64), "diag")
    bad = torch.diag(torch.tensor([1.0, -1.0], dtype=F64)).expand(3, 2, 2)
    with pytest.raises(ValueError, match="precisions_init must be symmetric positive definite"):
        precisions_cholesky_from_precisions(bad, "full")
