"""What :class:`~toolkit.algorithms.em.GaussianMixture` accepts and returns.

Data come in as numpy arrays, array-likes, pandas frames or torch tensors and are checked here
(finite, 2-D, enough rows, the fitted number of features), with messages that name the method
and, where scikit-learn's conformance checks look for a phrase, contain that phrase too.
Results go back in the input's kind: numpy for everything but tensors, tensors on the input's
device for tensors. Random states are numpy ``RandomState`` objects, as in scikit-learn, so that
an int seed draws the same initialization as ``sklearn.mixture.GaussianMixture``. The helpers every
scikit-learn estimator of the toolkit shares (:func:`check_X`, :func:`numpy_random_state`,
:func:`resolve_dtype`, :func:`to_output`) live in :mod:`toolkit._utils.array_validation` and are imported
here.
"""

from __future__ import annotations

from typing import Any

import torch

from toolkit._utils.array_validation import (
    as_numeric_array,
    as_tensor,
    check_no_graph,
    check_X,
    numpy_random_state,
    resolve_dtype,
    to_output,
)

__all__ = [
    "check_X",
    "check_inits",
    "check_sample_weight",
    "numpy_random_state",
    "resolve_dtype",
    "to_output",
]


def check_sample_weight(where: str, sample_weight: Any, n_samples: int, n_components: int, *,
                        like: torch.Tensor) -> torch.Tensor | None:
    """Non-negative finite (n_samples,) weights, positive on at least ``n_components`` rows."""
    if sample_weight is None:
        return None
    if not isinstance(sample_weight, torch.Tensor):
        sample_weight = as_numeric_array(where, "sample_weight", sample_weight)
    else:
        check_no_graph(where, "sample_weight", sample_weight)
    w = as_tensor(sample_weight, where=where, arg="sample_weight", dtype=like.dtype,
                  device=like.device, finite=True)
    if w.shape != (n_samples,):
        raise ValueError(f"{where}: sample_weight must have shape ({n_samples},), "
                         f"got {tuple(w.shape)}")
    if (w < 0).any():
        raise ValueError(f"{where}: sample_weight must be >= 0, got min "
                         f"{w.min().item():.6g}")
    positive = int((w > 0).sum())
    if positive == 0:
        raise ValueError(f"{where}: sample_weight must have a positive sum, got all zeros")
    if positive < n_components:
        raise ValueError(f"{where}: sample_weight must be positive on at least n_components="
                         f"{n_components} samples, got {positive}")
    return w


def check_inits(where: str, weights_init: Any, means_init: Any, precisions_init: Any, *,
                n_components: int, n_features: int, covariance_type: str,
                device: torch.device, dtype: torch.dtype
                ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """The user's initial parameters as float64 tensors, checked as scikit-learn checks them.

    The messages name the method and the argument, then say what is wrong in scikit-learn's
    words ("The parameter 'weights' should have the shape of (2,), but got (2, 1)"), except the
    range of the weights, whose minimum and maximum scikit-learn labels the other way round.

    ``dtype`` is the data's: it sets the tolerance of the weights' sum. The values are kept in
    float64 whatever it is, so that a float32 fit starts from exactly the parameters a float64
    fit (or scikit-learn's) starts from: rounding ``precisions_init`` to float32 and taking its
    Cholesky factor there would move an ill-conditioned start by ``~u·κ``.
    """
    k, d, ct = n_components, n_features, covariance_type
    kw: dict[str, Any] = {"where": where, "device": device, "dtype": torch.float64,
                          "finite": True}
    weights = means = precisions = None
    if weights_init is not None:
        weights = as_tensor(weights_init, arg="weights_init", **kw)
        if weights.shape != (k,):
            raise ValueError(f"{where}: weights_init: The parameter 'weights' should have the "
                             f"shape of ({k},), but got {tuple(weights.shape)}")
        if (weights < 0).any() or (weights > 1).any():
            raise ValueError(f"{where}: weights_init: The parameter 'weights' should be in the "
                             f"range [0, 1], but got min value {weights.min().item():.5f}, max "
                             f"value {weights.max().item():.5f}")
        atol = 1e-6 if dtype == torch.float32 else 1e-8
        if abs(weights.sum().item() - 1.0) > atol:
            raise ValueError(f"{where}: weights_init: The parameter 'weights' should be "
                             f"normalized, but got sum(weights) = {weights.sum().item():.5f}")
    if means_init is not None:
        means = as_tensor(means_init, arg="means_init", **kw)
        if means.shape != (k, d):
            raise ValueError(f"{where}: means_init: The parameter 'means' should have the shape "
                             f"of ({k}, {d}), but got {tuple(means.shape)}")
    if precisions_init is not None:
        precisions = as_tensor(precisions_init, arg="precisions_init", **kw)
        shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[ct]
        if precisions.shape != shape:
            raise ValueError(f"{where}: precisions_init: The parameter '{ct} precision' should "
                             f"have the shape of {shape}, but got {tuple(precisions.shape)}")
        if ct in ("full", "tied"):
            if not (torch.allclose(precisions, precisions.mT)
                    and bool((torch.linalg.eigvalsh(precisions) > 0).all())):
                raise ValueError(f"{where}: precisions_init: '{ct} precision' should be "
                                 f"symmetric, positive-definite")
        elif (precisions <= 0).any():
            raise ValueError(f"{where}: precisions_init: '{ct} precision' should be positive")
    return weights, means, precisions
