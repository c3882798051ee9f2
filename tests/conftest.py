"""Shared test settings: deterministic, quiet, and independent of the machine's thread count."""

import os

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
os.environ.setdefault("TQDM_DISABLE", "1")
# Tests use tiny tensors: one thread avoids oversubscription when the machine is busy and makes
# reductions run in a fixed order.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    torch.manual_seed(0)
