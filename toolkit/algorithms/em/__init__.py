"""EM for Gaussian mixtures: closed-form and autograd M-steps around one named block.

The expected complete-data log-likelihood (per sample, with sample weights ``w_n``)

.. math::

    Q(\\theta \\mid \\theta_t) = \\frac{1}{\\sum_n w_n} \\sum_n w_n \\sum_k r_{nk}
        \\,[\\log \\pi_k + \\log \\mathcal N(x_n; \\mu_k, \\Sigma_k)],
    \\qquad r_{nk} = p(z_n = k \\mid x_n; \\theta_t),

is maximized by the M-step with the responsibilities ``r`` held constant. That is the block
``stop_gradient(resp, name=BLOCK)`` (``BLOCK = "em.responsibilities"``) in
:func:`expected_complete_loglik`: with it, ``∇_θ Q`` at ``θ = θ_t`` equals the gradient of the
log-likelihood (Fisher's identity); without it ``r = r(θ)`` is differentiated too and the
objective becomes ``LL(θ) − H(r(θ))``, which rewards hard assignments and has different
maximizers.

Layout:

- :mod:`~toolkit.algorithms.em.core`: the block, the objective, the E-step, the log-densities,
  the closed-form M-step and :func:`gradient_m_step`;
- :mod:`~toolkit.algorithms.em.params`: :class:`GMMParams`, conversions between covariances and
  precision factors, the unconstrained parametrization of the gradient M-step;
- :mod:`~toolkit.algorithms.em.fast`: the estimator's iterations: moment matrices in float32
  or float64 where their cancellation is small enough, else
  :mod:`~toolkit.algorithms.em.centred` (whitened coordinates, float64);
- :mod:`~toolkit.algorithms.em.initialization`: initial responsibilities, drawn as
  scikit-learn draws them;
- :mod:`~toolkit.algorithms.em.inputs`: what the estimator accepts (checks, random states)
  and returns (numpy for numpy, tensors for tensors);
- :mod:`~toolkit.algorithms.em.estimator`: :class:`GaussianMixture`, a scikit-learn estimator.

Shapes follow scikit-learn (``k`` components, ``d`` features) for each ``covariance_type``:

=============  ====================  ====================================
type           covariances           precisions_cholesky
=============  ====================  ====================================
``full``       (k, d, d)             (k, d, d), upper triangular
``tied``       (d, d)                (d, d), upper triangular
``diag``       (k, d)                (k, d)
``spherical``  (k,)                  (k,)
=============  ====================  ====================================

``precisions_cholesky`` ``U`` satisfies ``U Uᵀ = Σ⁻¹`` (scikit-learn's convention), so
``log N(x; μ, Σ) = −d/2 log 2π + Σ_i log U_ii − ½ ‖Uᵀ(x − μ)‖²``.

References:
    Dempster, Laird & Rubin (1977), "Maximum likelihood from incomplete data via the EM
    algorithm", https://doi.org/10.1111/j.2517-6161.1977.tb01600.x ;
    Neal & Hinton (1998), "A view of the EM algorithm that justifies incremental, sparse, and
    other variants", https://doi.org/10.1007/978-94-011-5014-9_12 ;
    scikit-learn's ``sklearn/mixture/_gaussian_mixture.py`` (shapes, conventions, messages).
"""

from toolkit.algorithms.em.core import (
    BLOCK,
    e_step,
    expected_complete_loglik,
    gradient_m_step,
    log_likelihood,
    m_step,
)
from toolkit.algorithms.em.estimator import GaussianMixture
from toolkit.algorithms.em.params import (
    COVARIANCE_TYPES,
    GMMParams,
    from_unconstrained,
    precisions_cholesky_from_covariances,
    to_unconstrained,
)

__all__ = [
    "BLOCK",
    "COVARIANCE_TYPES",
    "GMMParams",
    "GaussianMixture",
    "e_step",
    "expected_complete_loglik",
    "from_unconstrained",
    "gradient_m_step",
    "log_likelihood",
    "m_step",
    "precisions_cholesky_from_covariances",
    "to_unconstrained",
]
