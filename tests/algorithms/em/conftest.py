"""Fixtures of the EM tests."""

from __future__ import annotations

import pytest
import torch

from toolkit.lab.data import MIXTURE_2D, gaussian_mixture


@pytest.fixture(scope="module")
def data() -> torch.Tensor:
    return gaussian_mixture(300, MIXTURE_2D, seed=1).X
