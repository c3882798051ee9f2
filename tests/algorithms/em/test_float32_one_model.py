"""A float32 GaussianMixture describes one mixture (issue 46): the stored precisions' Cholesky
factor is the factor of the stored covariances' inverse, to float32's rounding, even on
ill-conditioned mixtures far from the origin (where rounding each float64 result on its own
left them 3.7e-4 apart, relative)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit.algorithms.em import GaussianMixture
from toolkit.algorithms.em.params import precisions_cholesky_from_covariances

FLOAT32_ROUNDING = 2.0 ** -24  # half an ulp, relative


def _ill_conditioned(seed: int, condition: float, d: int = 4, k: int = 2, n: int = 400,
                     centre: float = 1e3) -> np.ndarray:
    """``k`` Gaussians with covariance condition number ``condition``, means ~``centre``."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(k):
        q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        scales = np.sqrt(np.logspace(0, -np.log10(condition), d))
        mean = centre + rng.standard_normal(d) * 10
        blocks.append(mean + (rng.standard_normal((n, d)) * scales) @ q.T)
    return np.concatenate(blocks).astype(np.float32)


@pytest.mark.parametrize("covariance_type", ["full", "tied", "diag", "spherical"])
@pytest.mark.parametrize("condition", [1e5, 1e7])
def test_the_stored_factor_is_the_cholesky_of_the_stored_covariances_inverse(
        covariance_type: str, condition: float, seed: int) -> None:
    X = _ill_conditioned(seed, condition)
    gm = GaussianMixture(2, covariance_type=covariance_type, max_iter=5, tol=0.0,
                         reg_covar=1e-9, random_state=seed)
    with pytest.warns(Warning):  # 5 iterations do not converge
        gm.fit(X)
    assert gm.covariances_.dtype == gm.precisions_cholesky_.dtype == np.float32
    exact = precisions_cholesky_from_covariances(
        torch.as_tensor(gm.covariances_, dtype=torch.float64), covariance_type).numpy()
    stored = gm.precisions_cholesky_.astype(np.float64)
    # elementwise, within float32's rounding of each element of the exact factor
    assert np.all(np.abs(stored - exact) <= 2 * FLOAT32_ROUNDING * np.abs(exact) + 1e-30)
    precisions = (exact @ np.swapaxes(exact, -1, -2) if covariance_type in ("full", "tied")
                  else exact ** 2)
    scale = np.abs(precisions).max()
    assert np.abs(gm.precisions_.astype(np.float64) - precisions).max() <= 4 * FLOAT32_ROUNDING \
        * scale
