"""The one comparison of gradients both verifiers make: :func:`same_gradient`.

An edit is kept only when every gradient it is not about stays what it was. Both the in-process
run of an edited step (:mod:`.in_process`) and the rerun of an edited script (:mod:`.rerun`)
judge "stays" here, within :data:`RTOL` of the larger norm: float64 arithmetic over float32
gradients, so that a sum taken in another order (another kernel, another thread count) passes
and a changed gradient does not.
"""

from __future__ import annotations

import torch

__all__ = ["RTOL", "same_gradient"]

#: the largest difference between two gradients called the same, relative to the larger norm
#: (the acceptance of issue 71: every saved tensor within 1e-5)
RTOL = 1e-5


def same_gradient(a: torch.Tensor | None, b: torch.Tensor | None, *, none_is_zero: bool = True,
                  rtol: float = RTOL) -> bool:
    """Whether ``a`` and ``b`` are the same gradient: equal shapes and ``‖a - b‖ ≤ rtol ·
    max(‖a‖, ‖b‖)``. ``None`` (no gradient) counts as zeros when ``none_is_zero`` (a script
    that sets ``.grad`` to ``None`` or to zeros trains the same), else equals only ``None``
    (the step audit tells a tensor the loss does not reach from one it reaches with zeros)."""
    if a is None or b is None:
        if not none_is_zero:
            return a is b
        other = a if b is None else b
        return other is None or not bool(other.any())
    if a.shape != b.shape:
        return False
    a64, b64 = a.detach().double(), b.detach().double()
    scale = max(float(a64.norm()), float(b64.norm()))
    return float((a64 - b64).norm()) <= rtol * scale
