"""Training and evaluation data as ``(x, y)`` batches on the model's device, and their checks.

:func:`~.training.adversarial_training` and :func:`~.training.evaluate_robustness` take their
data in any of PyTorch's usual forms:

- a ``torch.utils.data.DataLoader``, or any other iterable of ``(x, y)`` batches (a list of
  pairs, an ``IterableDataset``): used as it comes, its own batch size and order;
- a map-style ``torch.utils.data.Dataset`` whose items are ``(x, y)`` pairs (e.g. a
  ``TensorDataset``): batched with the function's ``batch_size``, in an order shuffled by the
  function's ``generator`` when training;
- a pair ``(X, y)`` of tensors or arrays (e.g. a ``toolkit.lab.data.Dataset``): the same, by
  indexing. A ``TensorDataset`` of two tensors is treated as this pair, so the two give the
  same numbers.

Training passes over the data once per epoch, so its data must be re-iterable: a one-shot
iterator (a generator, ``iter(loader)``) is accepted for one epoch only and is an error for
more. Tensors keep their dtype; arrays, lists and frames become tensors of the model's floating
dtype (labels: ``int64``). Every batch is moved to the model's device.

The checks every batch (and every attack's input) passes are here too: finite inputs inside the
``bounds``, labels ``>= 0`` of the right shape (:func:`check_inputs`) and, once the model has
given its logits, labels ``< n_classes`` (:func:`check_labels`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset, TensorDataset, default_collate

from toolkit._utils.array_validation import as_tensor, check_storage
from toolkit._utils.memory import is_allocation_failure
from toolkit._utils.param_validation import show_value

__all__ = ["Batches", "call_model", "check_bounds", "check_inputs", "check_labels",
           "check_logits", "check_model", "check_model_input", "model_device"]

Batch = tuple[torch.Tensor, torch.Tensor]
Bounds = tuple[float, float] | None
Model = Callable[[torch.Tensor], torch.Tensor]

_KINDS = ("a DataLoader, an iterable of (x, y) batches, a map-style Dataset of (x, y) items "
          "or a pair (X, y) of tensors or arrays")


def model_device(model: Model) -> torch.device | None:
    """The device of ``model``'s first parameter (or buffer); ``None`` for a plain callable."""
    if isinstance(model, nn.Module):
        for tensor in (*model.parameters(), *model.buffers()):
            return tensor.device
    return None


def model_dtype(model: Model) -> torch.dtype | None:
    """The dtype of ``model``'s first floating parameter, or ``None``."""
    if isinstance(model, nn.Module):
        for p in model.parameters():
            if p.is_floating_point():
                return p.dtype
    return None


# ---------------------------------------------------------------------------------------------
# checks of a batch


def check_bounds(where: str, bounds: object) -> Bounds:
    """``None`` or a pair ``lo < hi`` of finite numbers."""
    if bounds is None:
        return None
    try:
        lo, hi = (float(b) for b in bounds)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"{where}: bounds must be None or a pair (lo, hi) of numbers, "
                         f"got {bounds!r}") from None
    if not lo < hi:
        raise ValueError(f"{where}: bounds must satisfy lo < hi, got {bounds!r}")
    return lo, hi


def check_inputs(where: str, x: object, y: object, bounds: Bounds, custom_loss: bool) -> None:
    """``x`` (n, ...) floating, finite and inside ``bounds``; ``y`` (n,) with no negative label."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim < 1:
        desc = (f"{x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor)
                else type(x).__name__)
        raise TypeError(f"{where}: x must be a floating-point tensor of shape (n, ...), got {desc}")
    check_storage(where, "x", x)
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"{where}: y must be a tensor of labels, got {type(y).__name__}")
    check_storage(where, "y", y)
    n = x.shape[0]
    if y.ndim == 0 or y.shape[0] != n or (not custom_loss and y.ndim != 1):
        raise ValueError(f"{where}: y must have shape ({n},) to match x of shape "
                         f"{tuple(x.shape)}, got {tuple(y.shape)}")
    if not x.numel():
        return
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{where}: x contains NaN or infinity; remove or impute those values")
    if not custom_loss and y.dtype not in (torch.int64, torch.uint8):
        raise TypeError(f"{where}: y must hold integer class labels (int64) for the default "
                        f"cross-entropy loss, got dtype {y.dtype}; pass y.long(), or a loss_fn "
                        f"for other targets")
    if not (y.is_floating_point() or y.is_complex()) and y.numel() and int(y.min()) < 0:
        raise ValueError(f"{where}: y must hold class labels >= 0, got {int(y.min())}")
    if bounds is not None:
        lo, hi = bounds
        x_min, x_max = float(x.min()), float(x.max())
        if x_min < lo or x_max > hi:
            raise ValueError(f"{where}: x must lie within bounds ({lo}, {hi}), got values in "
                             f"[{x_min:.4g}, {x_max:.4g}]; pass bounds=None for unbounded inputs")


def check_logits(where: str, logits: object, n: int, custom_loss: bool) -> torch.Tensor:
    """The model's output: a tensor, of shape (n, n_classes) for the default cross-entropy."""
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{where}: model must return a tensor of logits (n, n_classes), got "
                        f"{type(logits).__name__}; wrap a model with several outputs, e.g. "
                        f"lambda x: model(x)[0]")
    if not custom_loss and (logits.ndim != 2 or logits.shape[0] != n):
        raise ValueError(f"{where}: model must return logits of shape ({n}, n_classes) for the "
                         f"default cross-entropy loss, got shape {tuple(logits.shape)}; pass a "
                         f"loss_fn for other outputs")
    return logits


def check_model(where: str, model: object) -> None:
    """``model`` is a callable (an ``nn.Module`` or a function of ``x`` returning logits)."""
    if not callable(model):
        raise TypeError(f"{where}: model must be a callable returning logits (an nn.Module or "
                        f"a function of x), got {show_value(model)}")


def check_model_input(where: str, model: Model, x: torch.Tensor) -> None:
    """``model`` a callable, and ``x`` in the dtype and on the device of its parameters (a
    plain callable, or a module without parameters, takes what it takes)."""
    check_model(where, model)
    dtype, device = model_dtype(model), model_device(model)
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{where}: x must have the dtype of the model's parameters, {dtype}, "
                        f"got {x.dtype}; pass x.to({dtype})")
    if device is not None and x.device != device:
        raise ValueError(f"{where}: x is on {x.device}, but the model's parameters are on "
                         f"{device}; pass x.to({str(device)!r})")


#: torch's words when a layer refuses its input's shape or dtype (``F.linear``, ``conv``,
#: ``matmul``, elementwise broadcasting); other errors of a user's model pass through unchanged
_INPUT_REFUSED = ("shapes cannot be multiplied", "must have the same dtype", "size mismatch",
                  "need to be at least 1D", "expected scalar type", "Expected 3D", "Expected 4D",
                  "Given groups", "must match the size of tensor", "doesn't match the broadcast")


def call_model(where: str, model: Model, x: torch.Tensor) -> Any:
    """``model(x)``, with torch's complaint about an input the model cannot take (a shape or
    dtype its first layer refuses) as a ``ValueError`` that names ``x`` and says what came;
    any other error of the model is the model's own and passes through unchanged."""
    try:
        return model(x)
    except RuntimeError as err:
        if is_allocation_failure(err) or not any(p in str(err) for p in _INPUT_REFUSED):
            raise
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{where}: model cannot take x of shape {tuple(x.shape)} and dtype "
                         f"{x.dtype}: {first}") from err


def check_labels(where: str, y: torch.Tensor, logits: torch.Tensor) -> None:
    """Integer labels must index the logits: ``0 <= y < n_classes``."""
    if y.is_floating_point() or y.ndim != 1 or not y.numel() or logits.ndim != 2:
        return
    n_classes = logits.shape[1]
    low, high = int(y.min()), int(y.max())
    if low < 0 or high >= n_classes:
        bad = low if low < 0 else high
        raise ValueError(f"{where}: y holds the label {bad}, but the model gives {n_classes} "
                         f"logits; labels must lie in [0, {n_classes - 1}]")


# ---------------------------------------------------------------------------------------------
# data of any kind as batches


def _is_array(value: object) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray)) or hasattr(value, "__array__")


def _inputs(where: str, arg: str, x: Any, dtype: torch.dtype | None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return as_tensor(x, where=where, arg=arg, dtype=dtype)


def _labels(where: str, arg: str, y: Any) -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        try:
            y = torch.as_tensor(np.asarray(y))
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{where}: {arg} must hold labels as a tensor or array, "
                            f"got {type(y).__name__}") from err
    if not (y.is_floating_point() or y.is_complex()) and y.dtype != torch.int64:
        y = y.long()  # class indices: cross-entropy wants int64
    return y


class Batches:
    """A re-iterable source of ``(x, y)`` batches on ``device``: one pass per ``iter()``.

    Args:
        where, arg: the calling function and argument, for error messages.
        data: see the module notes.
        model: its device and floating dtype decide where batches go and what arrays become.
        batch_size: batch size for a ``Dataset`` or a pair (iterables keep theirs).
        shuffle: draw a fresh order from ``generator`` at each pass (``Dataset`` and pair).
        generator: source of the order (``torch.randperm(n, generator=generator)``).
        passes: how many times the data will be iterated; more than one needs re-iterable data.
    """

    def __init__(self, where: str, arg: str, data: Any, *, model: Model, batch_size: int,
                 shuffle: bool = False, generator: torch.Generator | None = None,
                 passes: int = 1) -> None:
        self.where, self.arg = where, arg
        self.device = model_device(model)
        self.dtype = model_dtype(model)
        self.batch_size, self.shuffle, self.generator = batch_size, shuffle, generator
        self.pair: Batch | None = None
        self.dataset: Dataset | None = None
        self.iterable: Iterable[Any] | None = None
        if isinstance(data, TensorDataset) and len(data.tensors) == 2:
            data = data.tensors
        if isinstance(data, (torch.Tensor, np.ndarray, str, bytes, dict)) or hasattr(
                data, "toarray"):  # an array, text or a scipy.sparse matrix is no dataset
            raise TypeError(f"{where}: {arg} must be {_KINDS}, got {type(data).__name__}")
        if isinstance(data, Sequence) and len(data) == 2 and all(_is_array(v) for v in data):
            self.pair = self._check_pair(data)
        elif isinstance(data, Dataset) and not isinstance(data, IterableDataset) and hasattr(
                data, "__len__"):
            if len(data) == 0:
                raise ValueError(f"{where}: {arg} must hold at least one example, got an "
                                 f"empty {type(data).__name__}")
            self.dataset = data
        elif isinstance(data, Iterable):
            if passes > 1 and iter(data) is data:
                raise TypeError(f"{where}: {arg} is a one-shot iterator ({type(data).__name__}), "
                                f"which cannot be iterated for {passes} epochs; pass a "
                                f"DataLoader, a list of batches or another re-iterable object, "
                                f"or use epochs=1")
            self.iterable = data
        else:
            raise TypeError(f"{where}: {arg} must be {_KINDS}, got {type(data).__name__}")

    def _check_pair(self, data: Sequence[Any]) -> Batch:
        X = _inputs(self.where, self.arg, data[0], self.dtype)
        y = _labels(self.where, self.arg, data[1])
        if X.ndim < 1 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
            raise ValueError(f"{self.where}: {self.arg} must hold X (n, ...) and y (n,) with "
                             f"n >= 1, got {tuple(X.shape)} and {tuple(y.shape)}")
        if self.device is not None:
            X, y = X.to(self.device), y.to(self.device)
        return X, y

    def _batch(self, batch: Any) -> Batch:
        if not isinstance(batch, Sequence) or isinstance(batch, str) or len(batch) != 2:
            size = f" of {len(batch)}" if isinstance(batch, Sequence) else ""
            raise TypeError(f"{self.where}: each batch (or item) of {self.arg} must be a pair "
                            f"(x, y), got {type(batch).__name__}{size}")
        xb = _inputs(self.where, self.arg, batch[0], self.dtype)
        yb = _labels(self.where, self.arg, batch[1])
        if self.device is not None:
            xb, yb = xb.to(self.device), yb.to(self.device)
        return xb, yb

    def _order(self, n: int) -> torch.Tensor:
        if self.shuffle:
            return torch.randperm(n, generator=self.generator)
        return torch.arange(n)

    def __iter__(self) -> Iterator[Batch]:
        if self.pair is not None:
            X, y = self.pair
            order = self._order(X.shape[0]).to(X.device)
            for i in range(0, X.shape[0], self.batch_size):
                idx = order[i:i + self.batch_size]
                yield X[idx], y[idx]
        elif self.dataset is not None:
            order = self._order(len(self.dataset)).tolist()  # type: ignore[arg-type]
            for i in range(0, len(order), self.batch_size):
                items = [self._item(j) for j in order[i:i + self.batch_size]]
                yield self._batch(default_collate(items))
        else:
            for batch in self.iterable:  # type: ignore[union-attr]
                yield self._batch(batch)

    def _item(self, index: int) -> tuple[torch.Tensor, Any]:
        item = self.dataset[index]  # type: ignore[index]
        if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 2:
            raise TypeError(f"{self.where}: each item of {self.arg} must be a pair (x, y), got "
                            f"{type(item).__name__}")
        return _inputs(self.where, self.arg, item[0], self.dtype), item[1]

    def head(self, n: int) -> Batch | None:
        """The first ``n`` examples in storage order (pair and ``Dataset``), else ``None``."""
        if self.pair is not None:
            return self.pair[0][:n], self.pair[1][:n]
        if self.dataset is not None:
            count = min(n, len(self.dataset))  # type: ignore[arg-type]
            return self._batch(default_collate([self._item(j) for j in range(count)]))
        return None
