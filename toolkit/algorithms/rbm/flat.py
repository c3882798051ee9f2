"""The SGD step's work space: every parameter of an RBM in one flat vector.

One operation on a vector replaces one per parameter (the step, the momentum, the compensated
sum, the finiteness check), and the views shaped as the parameters are made once per training
state, not at every update. The weights' entries are laid out in the weights' own memory order
(row- or column-major), so that gathering and applying them are plain copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from toolkit.algorithms.rbm.core import RBMParams, is_column_major

__all__ = ["FlatParams"]


class FlatParams:
    """Work space of the SGD step, allocated once per training state: vectors of the entries of
    all parameters one after another (``theta``: the parameters, ``step``, ``velocity``, ``new``:
    the new parameters, with views shaped as the parameters in ``new_params`` and
    ``velocity_views``). One operation on a vector replaces one per parameter, and the views
    are made once, not at every update. After :meth:`apply` has copied ``new`` into the
    parameters, ``new`` and ``theta`` trade places: ``theta`` then holds the parameters
    (``holds``), which the next update of the same training loop reads instead of gathering
    them again (the loop clears ``holds`` when it starts, and a callback could write them).

    The weights' entries follow the weights' memory order: row by row, or column by column when
    the weights are stored column-major (the estimator's ``components_``, see
    :func:`~toolkit.algorithms.rbm.core.column_major`). Whatever the layout of the tensors
    gathered, the order is the same for all of them; it costs nothing only when their layout
    matches the weights' (autograd returns gradients in the layout of the parameters)."""

    def __init__(self, params: RBMParams) -> None:
        W = params.weights
        self._allocate([t.shape for t in params], W, is_column_major(W))

    def _allocate(self, shapes: list[torch.Size], like: torch.Tensor, transposed: bool) -> None:
        self.shapes, self.transposed = shapes, transposed
        n = sum(shape.numel() for shape in shapes)
        self.theta, self.step, self.velocity, self.new = (like.new_empty(n) for _ in range(4))
        self.theta_params, self.new_params = self._views(self.theta), self._views(self.new)
        self.velocity_views = self._views(self.velocity)
        self.key = _key(shapes[0], like.dtype, like.device, transposed)
        self.holds = False

    def __getstate__(self) -> dict[str, Any]:
        # scratch space: a copy (pickle, deepcopy) allocates its own, whose views are views
        # (pickling the views would store copies of their entries, no longer in the vectors)
        return {"shapes": self.shapes, "like": self.new.new_empty(0),
                "transposed": self.transposed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._allocate(state["shapes"], state["like"], state.get("transposed", False))

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        parts = flat.split([shape.numel() for shape in self.shapes])
        views = [part.view(shape) for part, shape in zip(parts, self.shapes)]
        if self.transposed:  # column by column: a (V, H) block, seen as (H, V)
            views[0] = parts[0].view(self.shapes[0][::-1]).T
        return views

    def gather(self, tensors: Sequence[torch.Tensor], out: torch.Tensor) -> torch.Tensor:
        """The entries of ``tensors`` (shaped as the parameters: a matrix, two vectors) copied
        into ``out``, the matrix's in the weights' memory order."""
        W = tensors[0].T if self.transposed else tensors[0]
        return torch.cat((W.reshape(-1), tensors[1], tensors[2]), out=out)

    def fits(self, W: torch.Tensor) -> bool:
        """Whether this work space was made for weights like ``W`` (shape, dtype, device and
        memory order)."""
        return self.key == _key(W.shape, W.dtype, W.device, is_column_major(W))

    def apply(self, params: RBMParams) -> None:
        """Copy ``new`` into the parameters; ``theta`` takes its place and holds them."""
        torch._foreach_copy_(list(params), self.new_params)
        self.theta, self.new = self.new, self.theta
        self.theta_params, self.new_params = self.new_params, self.theta_params
        self.holds = True


def _key(shape: torch.Size, dtype: torch.dtype, device: torch.device, transposed: bool
         ) -> tuple[Any, ...]:
    """What a work space fits: the weights' shape, dtype, device and memory order (the biases
    follow the weights)."""
    return (tuple(shape), dtype, device, transposed)
