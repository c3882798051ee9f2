"""Benchmark: CD-1 by autograd of ``cd_loss`` (toolkit) vs scikit-learn's BernoulliRBM (PCD-1).

Data: the binarized 8×8 digits tiled 8× (14,376 × 64); 256 hidden units, batch 64, learning
rate 0.05. Both estimators are timed on whole epochs in the same process; the script prints the
milliseconds per epoch of each and the ratio toolkit / scikit-learn (the goal is ≤ 0.5).
scikit-learn does PCD-1 with numpy (one Gibbs step per batch, a closed-form update); the toolkit
does CD-1 (one Gibbs step per batch) and takes the update from autograd of the free-energy
loss, so both do the same amount of sampling and matrix work per batch.

The timings are repeated with both libraries in their default thread settings and with both
limited to one thread (``torch.set_num_threads(1)``, ``threadpoolctl`` for numpy's BLAS), which is
the fairer comparison on a shared machine.

    python benchmarks/bench_rbm.py            # 3 epochs per measurement, 3 repeats
    python benchmarks/bench_rbm.py --quick    # 1 epoch, 1 repeat (smoke run)
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

import numpy as np
import torch

from toolkit.algorithms.rbm import BernoulliRBM
from toolkit.data import binarized_digits


@contextlib.contextmanager
def single_thread(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)


def per_epoch_ms(fit: Callable[[int], object], epochs: int, repeats: int
                 ) -> tuple[float, float]:
    """Medians over ``repeats`` of (wall time, process CPU time) of a fit with ``epochs`` epochs,
    divided by ``epochs``, in ms. CPU time is less disturbed by other processes on a busy
    machine; wall time is what a user waits."""
    fit(1)  # warm-up (allocations, lazy imports)
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fit(epochs)
        wall.append((time.perf_counter() - start) / epochs * 1e3)
        cpu.append((time.process_time() - start_cpu) / epochs * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 epoch, 1 repeat")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per measurement")
    parser.add_argument("--repeats", type=int, default=None, help="measurements (median)")
    parser.add_argument("--tile", type=int, default=8, help="copies of the digits (8: 14,376)")
    args = parser.parse_args()
    epochs = args.epochs or (1 if args.quick else 3)
    repeats = args.repeats or (1 if args.quick else 3)

    from sklearn import __version__ as sk_version
    from sklearn.neural_network import BernoulliRBM as SkRBM

    X = binarized_digits().X.repeat(args.tile, 1)  # float32 tensor
    X_np = X.numpy().astype(np.float64)  # scikit-learn computes in float64 anyway
    n_hidden, batch, lr = 256, 64, 0.05
    print(f"data {tuple(X.shape)}, {n_hidden} hidden, batch {batch}, lr {lr}; "
          f"torch {torch.__version__}, scikit-learn {sk_version}; "
          f"{epochs} epoch(s) x {repeats} repeat(s)")

    def fit_toolkit(n_epochs: int) -> object:
        return BernoulliRBM(n_hidden, method="cd", k=1, learning_rate=lr, batch_size=batch,
                            epochs=n_epochs, random_state=0, verbose=False).fit(X)

    def fit_sklearn(n_epochs: int) -> object:
        return SkRBM(n_components=n_hidden, learning_rate=lr, batch_size=batch,
                     n_iter=n_epochs, random_state=0).fit(X_np)

    for label, one_thread in (("default threads", False), ("one thread each", True)):
        with single_thread(one_thread):
            ours = per_epoch_ms(fit_toolkit, epochs, repeats)
            theirs = per_epoch_ms(fit_sklearn, epochs, repeats)
        for i, clock in enumerate(("wall", "cpu")):
            print(f"[{label}, {clock:4s}] toolkit CD-1 (autograd): {ours[i]:8.1f} ms/epoch | "
                  f"scikit-learn PCD-1: {theirs[i]:8.1f} ms/epoch | "
                  f"ratio {ours[i] / theirs[i]:.3f} (goal <= 0.5)")


if __name__ == "__main__":
    main()
