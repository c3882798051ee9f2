"""The SGD step's work space: every parameter of an RBM in one flat vector.

One operation on a vector replaces one per parameter (the step, the momentum, the compensated
sum, the finiteness check), and the views shaped as the parameters are made once per training
state, not at every update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from toolkit.algorithms.rbm.core import RBMParams

__all__ = ["FlatParams"]


class FlatParams:
    """Work space of the SGD step, allocated once per training state: vectors of the entries of
    all parameters one after another (``theta``: the parameters, ``step``, ``velocity``, ``new``:
    the new parameters, with views shaped as the parameters in ``new_params`` and
    ``velocity_views``). One operation on a vector replaces one per parameter, and the views
    are made once, not at every update. After :meth:`apply` has copied ``new`` into the
    parameters, ``new`` and ``theta`` trade places: ``theta`` then holds the parameters
    (``holds``), which the next update of the same training loop reads instead of gathering
    them again (the loop clears ``holds`` when it starts, and a callback could write them)."""

    def __init__(self, params: RBMParams) -> None:
        self._allocate([t.shape for t in params], params.weights)

    def _allocate(self, shapes: list[torch.Size], like: torch.Tensor) -> None:
        self.shapes = shapes
        n = sum(shape.numel() for shape in shapes)
        self.theta, self.step, self.velocity, self.new = (like.new_empty(n) for _ in range(4))
        self.theta_params, self.new_params = self._views(self.theta), self._views(self.new)
        self.velocity_views = self._views(self.velocity)
        self.key = (shapes[0], like.dtype, like.device)  # the parameters it fits (b, c follow W)
        self.holds = False

    def __getstate__(self) -> dict[str, Any]:
        # scratch space: a copy (pickle, deepcopy) allocates its own, whose views are views
        # (pickling the views would store copies of their entries, no longer in the vectors)
        return {"shapes": self.shapes, "like": self.new.new_empty(0)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._allocate(state["shapes"], state["like"])

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        parts = flat.split([shape.numel() for shape in self.shapes])
        return [part.view(shape) for part, shape in zip(parts, self.shapes)]

    @staticmethod
    def gather(tensors: Sequence[torch.Tensor], out: torch.Tensor) -> torch.Tensor:
        """The entries of ``tensors`` (shaped as the parameters: a matrix, two vectors) copied
        into ``out``."""
        return torch.cat((tensors[0].reshape(-1), tensors[1], tensors[2]), out=out)

    def apply(self, params: RBMParams) -> None:
        """Copy ``new`` into the parameters; ``theta`` takes its place and holds them."""
        torch._foreach_copy_(list(params), self.new_params)
        self.theta, self.new = self.new, self.theta
        self.theta_params, self.new_params = self.new_params, self.theta_params
        self.holds = True
