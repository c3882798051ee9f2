"""Save and restore the global random generators: ``random``, numpy, torch's CPU and CUDA.

One helper for everything that runs a piece of code twice from the same random state (the
runner's ``ctx.compare``, the lens's ``gradient_flow``, the audit's ``restore_state``).
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

import numpy as np
import torch

__all__ = ["RngState", "get_rng_state", "set_rng_state"]


class RngState(NamedTuple):
    """The state of every global generator (CUDA's only when CUDA was initialised)."""

    python: Any
    numpy: Any
    torch_cpu: torch.Tensor
    torch_cuda: list[torch.Tensor] | None


def get_rng_state() -> RngState:
    """The current state of ``random``, numpy's global generator and torch's (CPU and CUDA)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return RngState(random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)


def set_rng_state(state: RngState) -> None:
    """Put every global generator back in ``state`` (from :func:`get_rng_state`)."""
    random.setstate(state.python)
    np.random.set_state(state.numpy)
    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda is not None:
        torch.cuda.set_rng_state_all(state.torch_cuda)
