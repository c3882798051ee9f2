"""What :class:`~toolkit.algorithms.rbm.BernoulliRBM` accepts: dense data or sparse matrices.

Dense data (tensors, numpy arrays, array-likes, pandas frames) become one tensor, as for every
estimator of the toolkit (:func:`toolkit._utils.array_validation.check_X`). A ``scipy.sparse`` matrix or
array (CSR, CSC, COO, LIL, …) is kept sparse, as CSR rows in the computation's dtype, and is
densified a block of rows at a time (:class:`SparseRows`): a mini-batch in training, a chunk of
:data:`CHUNK_ELEMENTS` entries in ``transform``, ``score_samples`` and ``gibbs``, never the
whole matrix. Both kinds give the same numbers: dense data pass through the same chunks.

Values are read as the probabilities that the visible units are on, so they belong in [0, 1].
Values outside it are computed as given, as scikit-learn's ``BernoulliRBM`` computes them (a
scaler fitted on training folds maps a test fold slightly outside [0, 1], and a pipeline must not
stop there), with one :class:`DataRangeWarning` per call that says what they mean for the model
and how to scale (:func:`check_range`). Only the likelihood, defined for binary states, requires
0 and 1.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from toolkit._utils.array_validation import check_X, check_X_shape
from toolkit._utils.caller import user_stacklevel

__all__ = ["CHUNK_ELEMENTS", "DataRangeWarning", "SparseRows", "batches", "check_data",
           "check_range", "is_sparse", "map_rows"]

#: Entries densified (or computed) at once by :func:`map_rows`: 2**20, 8 MiB of float64.
CHUNK_ELEMENTS = 2**20


class DataRangeWarning(UserWarning):
    """Data with values outside [0, 1] given to a Bernoulli RBM: computed as given, as
    scikit-learn's ``BernoulliRBM`` does, but no longer probabilities of binary units."""


def check_range(where: str, X: torch.Tensor, *, binary: bool = False) -> None:
    """Warn once (:class:`DataRangeWarning`) when ``X`` has values outside [0, 1]; with
    ``binary``, raise ``ValueError`` unless every value is 0 or 1. ``X``: finite values."""
    if X.numel() == 0:
        return
    if binary:
        if not bool(((X == 0) | (X == 1)).all()):
            raise ValueError(f"{where}: X must be binary (only 0 and 1): a likelihood is defined "
                             f"for binary states; threshold X (e.g. X > 0.5)")
        return
    lo, hi = (float(t) for t in torch.aminmax(X))
    if lo >= 0 and hi <= 1:
        return
    warnings.warn(
        f"{where}: X has values outside [0, 1] (got values in [{lo:g}, {hi:g}]); a Bernoulli "
        f"RBM reads each value as the probability that a visible unit is on, so these are no "
        f"probabilities: they are computed as given (as scikit-learn's BernoulliRBM does), "
        f"driving the hidden units harder than any binary input can, and free energies or "
        f"pseudo-likelihoods of them are no log-probabilities; scale X into [0, 1] first, "
        f"e.g. with sklearn.preprocessing.MinMaxScaler(clip=True) or load_digits().data / 16",
        DataRangeWarning, stacklevel=user_stacklevel())


def is_sparse(X: Any) -> bool:
    """Whether ``X`` is a scipy.sparse matrix or array (scipy is not imported to find out)."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(X)


class SparseRows:
    """The rows of a sparse matrix, densified into tensors a block at a time.

    ``csr``: a ``scipy.sparse`` CSR matrix in the computation's dtype (validated by
    :func:`check_data`); ``dtype``/``device``: where the dense blocks go. ``shape``, ``dtype``
    and ``device`` read like a tensor's.
    """

    def __init__(self, csr: Any, dtype: torch.dtype, device: torch.device) -> None:
        self.csr, self.dtype, self.device = csr, dtype, torch.device(device)
        self.shape = torch.Size(csr.shape)

    def rows(self, index: slice | np.ndarray) -> torch.Tensor:
        """Dense rows ``index`` (a slice or integer positions) as a tensor."""
        block = self.csr[index].toarray()
        return torch.from_numpy(block).to(device=self.device, dtype=self.dtype)

    def column_sums(self) -> torch.Tensor:
        """Sum of every column in float64 (n_features,)."""
        sums = np.asarray(self.csr.sum(axis=0, dtype=np.float64)).ravel()
        return torch.from_numpy(sums).to(self.device)


def check_data(where: str, X: Any, *, device: torch.device, dtype: torch.dtype,
               n_features: int | None = None, binary: bool = False
               ) -> torch.Tensor | SparseRows:
    """(n_samples, n_features) finite values (only 0 and 1 with ``binary``; a warning for
    values outside [0, 1], see :func:`check_range`), dense as a tensor, sparse as
    :class:`SparseRows`; messages as for dense data."""
    if not is_sparse(X):
        Xt = check_X(where, X, device=device, dtype=dtype, n_features=n_features)
        check_range(where, Xt, binary=binary)
        return Xt
    if len(X.shape) != 2:
        raise ValueError(f"{where}: X must be 2-D (n_samples, n_features), got shape "
                         f"{tuple(X.shape)}")
    if np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"{where}: X must hold real numbers; Complex data not supported (got "
                         f"dtype {X.dtype})")
    csr = X.tocsr().astype(torch.empty((), dtype=dtype).numpy().dtype, copy=False)
    n, d = csr.shape
    check_X_shape(where, (n, d), n_features=n_features)
    stored = torch.from_numpy(np.ascontiguousarray(csr.data))  # the entries kept; the rest are 0
    if not bool(torch.isfinite(stored).all()):
        raise ValueError(f"{where}: X contains NaN or infinity; remove or impute those values")
    if csr.nnz < n * d:  # the implicit zeros are values too (for the range in the message)
        stored = torch.cat([stored, stored.new_zeros(1)])
    check_range(where, stored, binary=binary)
    return SparseRows(csr, dtype, device)


def batches(X: torch.Tensor | SparseRows, batch_size: int, order: torch.Tensor | None
            ) -> Iterator[torch.Tensor]:
    """Mini-batches of ``batch_size`` rows of ``X`` (the last one shorter), in ``order`` (a
    permutation of the rows) or in row order; dense tensors for both kinds of ``X``."""
    if isinstance(X, torch.Tensor):  # index_select: faster than X[order]
        yield from (X if order is None else X.index_select(0, order)).split(batch_size)
        return
    n = X.shape[0]
    positions = None if order is None else order.cpu().numpy()
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        yield X.rows(slice(start, stop) if positions is None else positions[start:stop])


def map_rows(fn: Callable[[torch.Tensor], torch.Tensor], X: torch.Tensor | SparseRows
             ) -> torch.Tensor:
    """``fn`` applied to consecutive chunks of rows of ``X`` (about :data:`CHUNK_ELEMENTS`
    entries each, dense and sparse alike), the results concatenated along the first axis."""
    n, d = X.shape
    step = max(1, CHUNK_ELEMENTS // max(d, 1))
    parts = []
    for start in range(0, n, step):
        stop = min(start + step, n)
        block = X[start:stop] if isinstance(X, torch.Tensor) else X.rows(slice(start, stop))
        parts.append(fn(block))
    return torch.cat(parts) if len(parts) != 1 else parts[0]
