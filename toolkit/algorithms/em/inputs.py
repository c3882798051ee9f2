"""What :class:`~toolkit.algorithms.em.GaussianMixture` accepts and returns.

Data come in as numpy arrays, array-likes, pandas frames or torch tensors and are checked here
(finite, 2-D, enough rows, the fitted number of features), with messages that name the method
and, where scikit-learn's conformance checks look for a phrase, contain that phrase too.
Results go back in the input's kind: numpy for everything but tensors, tensors on the input's
device for tensors. Random states are numpy ``RandomState`` objects, as in scikit-learn, so that
an int seed draws the same initialization as ``sklearn.mixture.GaussianMixture``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse
import torch
from sklearn.utils import check_random_state

from toolkit._validation import as_tensor, is_int

__all__ = [
    "check_X",
    "check_inits",
    "check_sample_weight",
    "numpy_random_state",
    "resolve_dtype",
    "to_output",
]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_dtype(dtype: str | torch.dtype | None, X: Any) -> torch.dtype:
    """The computation's dtype: ``dtype`` if given, else float32 data stay float32 and
    everything else becomes float64 (scikit-learn's rule for mixtures). ``dtype`` is checked."""
    if dtype is not None:
        return _DTYPES.get(dtype, dtype)  # type: ignore[arg-type]
    kind = getattr(X, "dtype", None)
    return torch.float32 if kind in (torch.float32, np.float32) else torch.float64


def _as_numeric_array(where: str, arg: str, x: Any) -> np.ndarray:
    """A real numeric numpy array from an array-like (object arrays of numbers are converted)."""
    if scipy.sparse.issparse(x):
        raise TypeError(f"{where}: {arg} must be dense; sparse input is not supported (got "
                        f"{type(x).__name__}), convert it with {arg}.toarray()")
    try:
        arr = np.asarray(x)
        if arr.dtype == object:
            arr = arr.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where}: {arg} must be an array-like of numbers or a tensor "
                        f"({err})") from err
    if np.iscomplexobj(arr):
        raise ValueError(f"{where}: {arg} must hold real numbers; Complex data not supported "
                         f"(got dtype {arr.dtype})")
    if not arr.flags.writeable:  # torch cannot wrap a read-only buffer (e.g. a memmap)
        arr = arr.copy()
    return arr


def check_X(where: str, X: Any, *, device: torch.device, dtype: torch.dtype,
            n_features: int | None = None, min_samples: int = 1) -> torch.Tensor:
    """(n_samples, n_features) finite data as a tensor in ``dtype`` on ``device``."""
    if not isinstance(X, torch.Tensor):
        X = _as_numeric_array(where, "X", X)
    elif X.is_complex():
        raise ValueError(f"{where}: X must hold real numbers; Complex data not supported (got "
                         f"dtype {X.dtype})")
    if X.ndim != 2:
        raise ValueError(f"{where}: X must be 2-D (n_samples, n_features), got shape "
                         f"{tuple(X.shape)}; Reshape your data with X.reshape(-1, 1) if it has "
                         f"a single feature or X.reshape(1, -1) if it is a single sample")
    X = as_tensor(X, where=where, arg="X", dtype=dtype, device=device, finite=True)
    n, d = X.shape
    if n < min_samples:
        raise ValueError(f"{where}: X must have at least {min_samples} samples, got "
                         f"n_samples={n} (shape={tuple(X.shape)})")
    if d == 0:
        raise ValueError(f"{where}: X must have at least one feature, got 0 feature(s) "
                         f"(shape={tuple(X.shape)}) while a minimum of 1 is required.")
    if n_features is not None and d != n_features:
        raise ValueError(f"{where}: X has {d} features, but GaussianMixture is expecting "
                         f"{n_features} features as input.")
    return X


def check_sample_weight(where: str, sample_weight: Any, n_samples: int, n_components: int, *,
                        like: torch.Tensor) -> torch.Tensor | None:
    """Non-negative finite (n_samples,) weights, positive on at least ``n_components`` rows."""
    if sample_weight is None:
        return None
    if not isinstance(sample_weight, torch.Tensor):
        sample_weight = _as_numeric_array(where, "sample_weight", sample_weight)
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
    """The user's initial parameters as tensors, checked as scikit-learn checks them."""
    k, d, ct = n_components, n_features, covariance_type
    kw: dict[str, Any] = {"where": where, "device": device, "dtype": dtype, "finite": True}
    weights = means = precisions = None
    if weights_init is not None:
        weights = as_tensor(weights_init, arg="weights_init", **kw)
        if weights.shape != (k,):
            raise ValueError(f"{where}: weights_init must have shape ({k},), "
                             f"got {tuple(weights.shape)}")
        if (weights < 0).any() or (weights > 1).any():
            raise ValueError(f"{where}: weights_init must be in [0, 1], got "
                             f"{weights.tolist()}")
        atol = 1e-6 if dtype == torch.float32 else 1e-8
        if abs(weights.sum().item() - 1.0) > atol:
            raise ValueError(f"{where}: weights_init must sum to 1, got "
                             f"{weights.sum().item():.10g}")
    if means_init is not None:
        means = as_tensor(means_init, arg="means_init", **kw)
        if means.shape != (k, d):
            raise ValueError(f"{where}: means_init must have shape ({k}, {d}), "
                             f"got {tuple(means.shape)}")
    if precisions_init is not None:
        precisions = as_tensor(precisions_init, arg="precisions_init", **kw)
        shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[ct]
        if precisions.shape != shape:
            raise ValueError(f"{where}: precisions_init must have shape {shape} for "
                             f"covariance_type={ct!r}, got {tuple(precisions.shape)}")
        if ct in ("full", "tied"):
            if not torch.allclose(precisions, precisions.mT):
                raise ValueError(f"{where}: precisions_init must be symmetric")
        elif (precisions <= 0).any():
            raise ValueError(f"{where}: precisions_init must be > 0")
    return weights, means, precisions


def numpy_random_state(random_state: Any, *, where: str) -> np.random.RandomState:
    """scikit-learn's ``check_random_state`` (None, an int seed or a ``RandomState``), plus a
    numpy ``Generator`` or a ``torch.Generator``, from which a seed is drawn."""
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return check_random_state(random_state)
    if is_int(random_state):
        if not 0 <= random_state < 2**32:
            raise ValueError(f"{where}: random_state must be an int in [0, 2**32 - 1], got "
                             f"{random_state}")
        return np.random.RandomState(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(int(random_state.integers(0, 2**32)))
    if isinstance(random_state, torch.Generator):
        seed = torch.randint(0, 2**31 - 1, (1,), generator=random_state,
                             device=random_state.device)
        return np.random.RandomState(int(seed.item()))
    raise TypeError(f"{where}: random_state must be None, an int, a numpy RandomState or "
                    f"Generator, or a torch.Generator, got {type(random_state).__name__} "
                    f"{random_state!r}")


def to_output(t: torch.Tensor, like: Any) -> np.ndarray | torch.Tensor:
    """``t`` in the kind of ``like``: a tensor on ``like``'s device, else a numpy array."""
    if isinstance(like, torch.Tensor):
        return t.to(like.device)
    return t.cpu().numpy()
