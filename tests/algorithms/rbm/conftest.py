"""Fixtures of the RBM tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tiny matrices: on a shared machine a second thread (torch's or the BLAS's) costs far more
    than it saves (measured: 8x slower training under load), so these tests run on one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)
