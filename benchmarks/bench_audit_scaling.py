"""Benchmark of the step audit's cost against the size of the graph it reads: it must grow
linearly, not faster.

Two chains of ``n`` parameters, each audited once per size (``--sizes``, default 1k, 2k, 4k and
10k parameters), in rounds that alternate the sizes (medians of ``--rounds``):

- ``scalars``: ``x = 1; x = x * p_i`` over ``n`` scalar parameters, ``loss = x``: one node per
  parameter;
- ``layers``: ``nn.Sequential`` of ``n / 2`` ``Linear(2, 2)`` (a weight and a bias each), ``loss =
  sum f(x)²``. So deep a chain underflows: every parameter's gradient is exactly zero, the
  case where the dead rule looks for the point at which each gradient vanishes (once per
  tensor, which walked the graph once per tensor before: quadratic).

For each size the script prints the median seconds and seconds per 1,000 parameters (a linear
audit keeps that column flat), then the ratio of seconds per parameter at the largest size to
the smallest: 1 is linear, the ratio of the sizes quadratic. ``--check SECONDS`` exits 1 when the largest size takes
longer (the issue's bound: 10,000 parameters in under 5 s).

    python benchmarks/bench_audit_scaling.py [--sizes 1000 2000 4000 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from toolkit import audit_step


def scalars(n: int) -> tuple[Callable[[], torch.Tensor], Any]:
    ps = [nn.Parameter(torch.tensor(1.0 + 1e-4 * i)) for i in range(n)]

    def step() -> torch.Tensor:
        x = torch.tensor(1.0)
        for p in ps:
            x = x * p
        return x

    return step, torch.optim.SGD(ps, lr=0.1)


def layers(n: int) -> tuple[Callable[[], torch.Tensor], Any]:
    net = nn.Sequential(*[nn.Linear(2, 2) for _ in range(n // 2)])
    x = torch.randn(3, 2)
    return (lambda: net(x).pow(2).sum()), torch.optim.SGD(net.parameters(), lr=0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 10000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check", type=float, default=None, metavar="SECONDS")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    worst = 0.0
    print(f"{'chain':8} {'parameters':>10} {'median s':>9} {'s per 1k':>9}")
    for name, build in (("scalars", scalars), ("layers", layers)):
        times: dict[int, list[float]] = {n: [] for n in args.sizes}
        for _ in range(args.rounds):
            for n in args.sizes:   # interleaved: each round visits every size
                step, opt = build(n)
                start = time.perf_counter()
                audit_step(step, opt)
                times[n].append(time.perf_counter() - start)
        per = {}
        for n in args.sizes:
            med = statistics.median(times[n])
            per[n] = med / n
            print(f"{name:8} {n:>10,} {med:>9.2f} {1000 * med / n:>9.3f}", flush=True)
        small, large = min(args.sizes), max(args.sizes)
        print(f"{name:8} growth ratio (s per parameter at {large:,} / at {small:,}): "
              f"{per[large] / per[small]:.2f} (1 is linear; {large / small:.3g} would be "
              f"quadratic)")
        worst = max(worst, statistics.median(times[max(args.sizes)]))
    if args.check is not None and worst > args.check:
        print(f"the largest chain took {worst:.2f} s, over {args.check} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
