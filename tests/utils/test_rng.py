"""One save/restore of the global generators, for everything that runs code twice alike."""

from __future__ import annotations

import random

import numpy as np
import torch

from toolkit._utils.rng import get_rng_state, set_rng_state


def _draw() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_restoring_the_state_repeats_every_generator() -> None:
    state = get_rng_state()
    first = _draw()
    _draw()
    set_rng_state(state)
    assert _draw() == first


def test_the_state_is_a_copy() -> None:
    state = get_rng_state()
    _draw()
    assert not torch.equal(state.torch_cpu, torch.get_rng_state())
