"""The chunk passes of the EM paths on several threads: the same numbers, the setting restored."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit._utils.threads import intra_op_threads
from toolkit.algorithms.em import GaussianMixture
from toolkit.algorithms.em.chunks import map_chunks

from ._helpers import _init_params


def test_map_chunks_in_order_and_restores_threads() -> None:
    with intra_op_threads(3):
        out = map_chunks(lambda a, b: (a, b, torch.get_num_threads()), 10, 3, torch.device("cpu"))
        assert torch.get_num_threads() == 3
    assert [(a, b) for a, b, _ in out] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert {t for _, _, t in out} == {1}  # each chunk on one intra-op thread


def test_map_chunks_raises_a_workers_error_after_all_are_done() -> None:
    def fn(start: int, stop: int) -> int:
        if start == 6:
            raise ValueError("chunk 6")
        return start

    with intra_op_threads(2), pytest.raises(ValueError, match="chunk 6"):
        map_chunks(fn, 8, 2, torch.device("cpu"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ct", ["full", "diag"])
def test_moment_step_same_numbers_with_one_or_two_threads(dtype: torch.dtype, ct: str) -> None:
    """The chunks' sums come in chunk order: one and two threads give the same iteration."""
    from toolkit.algorithms.em.fast import MomentEM

    rng = np.random.default_rng(0)
    centers = rng.normal(0, 3, size=(3, 4))
    X = torch.as_tensor(centers[rng.integers(0, 3, 2000)] + rng.normal(size=(2000, 4)))
    init = _init_params(X.numpy(), 3, ct)
    p = GaussianMixture(3, covariance_type=ct, max_iter=0, **init).fit(X)._fitted_params()
    path = MomentEM(X.to(dtype), torch.ones(len(X), dtype=torch.float64), ct, 1e-6)
    path.chunk = 128  # many chunks
    results = []
    for threads in (1, 2):
        with intra_op_threads(threads):
            results.append(path.step(path.to_compute(p)))
    (lp1, new1), (lp2, new2) = results
    assert torch.equal(lp1, lp2)
    for a, b in zip(new1, new2):
        assert torch.equal(a, b)


@pytest.mark.parametrize("ct", ["full", "spherical"])
def test_centred_step_same_numbers_with_one_or_two_threads(ct: str) -> None:
    from toolkit.algorithms.em.centred import CentredEM

    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(500, 3)) + rng.integers(0, 2, size=(500, 1)) * 4)
    init = _init_params(X.numpy(), 2, ct)
    p = GaussianMixture(2, covariance_type=ct, max_iter=0, **init).fit(X)._fitted_params()
    path = CentredEM(X, torch.ones(len(X), dtype=torch.float64), ct, 1e-6)
    path.chunk = 16  # many chunks
    results = []
    for threads in (1, 2):
        with intra_op_threads(threads):
            results.append(path.step(p))
    (lp1, new1), (lp2, new2) = results
    assert torch.equal(lp1, lp2)
    for a, b in zip(new1, new2):
        assert torch.equal(a, b)
