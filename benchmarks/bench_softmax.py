"""Benchmark of the softmax module: forward+backward against ``torch.softmax``, and the block's cost.

For each input (float32; default 4096×4096 and the long-row 64×50000) it times one forward and
one backward (``y.backward(g)`` with a fixed random ``g``) of

- ``torch``: ``torch.softmax(x, -1)``, the peer (one fused kernel each way);
- ``blocked``: ``stable_softmax(x)``, the reference composition with the ``softmax.max`` block;
- ``unblocked``: the same inside ``disable_blocks("softmax.*")``;
- ``fused``: ``stable_softmax(x, impl="fused")``, the ``torch.autograd.Function`` path;

alternating the contenders call by call (so that machine load drifts over all of them alike)
and printing medians and the ratios blocked/torch (target ≤ 2.0 on 4096×4096), blocked/
unblocked (target < 1) and fused/torch, plus autograd nodes, bytes saved for backward and peak
memory (``measure_memory``). Timings on a shared machine are noisy; compare ratios from one run.
The process CPU time is printed too: on a loaded machine it leaves out the time spent waiting
for a core.

On CPU (glibc), every fresh block of 64 MiB is a new mapping whose pages fault on first touch:
about 20 ms per 4096×4096 float32 tensor here, more than the arithmetic of torch's softmax.
Each forward+backward needs two such tensors (the output and the input's gradient); the
reference composition computes in slabs of about 1M elements so that its temporaries are
recycled and it needs no more than those two. But in one process the contenders share the
allocator, and a contender can find memory that another one left mapped (torch's time then
drops from ~50 to ~30 ms). So the script also times each contender **alone in fresh
processes** (``--isolated-rounds``, default 5, alternating the order), the steady state of a
loop of its own, which is what the acceptance ratio uses, and prints the per-round ratios.
Finally it repeats the isolated timing with glibc told to keep freed memory
(``MALLOC_MMAP_MAX_=0``, no trimming): no page is touched fresh, and the ratios are those of
the arithmetic alone (skip with ``--no-arithmetic``).

    python benchmarks/bench_softmax.py [--quick] [--repeat N] [--threads N] [--device cpu|cuda]
        [--shapes 4096x4096,64x50000] [--isolated-rounds N] [--no-arithmetic]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from toolkit import disable_blocks
from toolkit.algorithms.softmax import stable_softmax
from toolkit.measure import count_graph_nodes, measure_memory

VARIANTS = ("torch", "blocked", "unblocked", "fused")


def contenders() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    def unblocked(x: torch.Tensor) -> torch.Tensor:
        with disable_blocks("softmax.*"):
            return stable_softmax(x)

    return {
        "torch": lambda x: torch.softmax(x, -1),
        "blocked": stable_softmax,
        "unblocked": unblocked,
        "fused": lambda x: stable_softmax(x, impl="fused"),
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_shape(rows: int, cols: int, *, repeat: int, device: torch.device) -> dict[str, dict]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=gen).to(device).requires_grad_()
    g = torch.randn(rows, cols, generator=gen).to(device)
    fns = contenders()

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        fn(x).backward(g)
        x.grad = None

    # correctness first: every contender computes the same gradient
    grads = {}
    for name, fn in fns.items():
        (grads[name],) = torch.autograd.grad(fn(x), x, g)
    for name in VARIANTS[1:]:
        torch.testing.assert_close(grads[name], grads["torch"], rtol=1e-4, atol=1e-6)

    for fn in fns.values():  # warm-up
        step(fn)
    times: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            _sync(device)
            start, start_cpu = time.perf_counter(), time.process_time()
            step(fn)
            _sync(device)
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    out: dict[str, dict] = {}
    for name, fn in fns.items():
        mem = measure_memory(lambda fn=fn: step(fn), device=device)
        out[name] = {"median": statistics.median(times[name]), "min": min(times[name]),
                     "cpu": statistics.median(cpu[name]),
                     "nodes": count_graph_nodes(fn(x)), "saved": mem.saved_tensor_bytes,
                     "peak": mem.peak_bytes}
    return out


def time_alone(name: str, rows: int, cols: int, *, repeat: int, device: torch.device) -> float:
    """Median seconds of forward+backward of one contender, in this process, after a warm-up."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=gen).to(device).requires_grad_()
    g = torch.randn(rows, cols, generator=gen).to(device)
    fn = contenders()[name]
    times = []
    for i in range(repeat + 1):
        _sync(device)
        start = time.perf_counter()
        fn(x).backward(g)
        x.grad = None
        _sync(device)
        if i:  # the first call is the warm-up
            times.append(time.perf_counter() - start)
    return statistics.median(times)


# glibc settings that keep freed memory in the process (no mmap for large blocks, no trimming),
# so that a steady-state loop touches no fresh page: what remains is the arithmetic.
NO_FRESH_PAGES_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**40),
                      "MALLOC_TOP_PAD_": str(2**28)}


def bench_isolated(rows: int, cols: int, *, rounds: int, repeat: int, args: argparse.Namespace,
                   env: dict[str, str] | None = None) -> dict[str, list[float]]:
    """Per round, each contender's median time in a fresh process (order alternating)."""
    results: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        for name in order:
            cmd = [sys.executable, __file__, "--alone", name, "--shapes", f"{rows}x{cols}",
                   "--repeat", str(repeat), "--device", args.device]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                 env={**os.environ, **(env or {})}).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1])["seconds"])
    return results


def print_isolated(results: dict[str, list[float]], label: str, target: str) -> None:
    rounds = len(results["torch"])
    print(f"  {label}, median of {rounds} fresh processes each: "
          + ", ".join(f"{name} {statistics.median(v) * 1e3:.2f} ms" for name, v in results.items()))
    for a, b, note in [("blocked", "torch", target), ("blocked", "unblocked", "  (target < 1)"),
                       ("fused", "torch", "")]:
        ratios = [x / y for x, y in zip(results[a], results[b])]
        print(f"  ratio {a + '/' + b:<17} = {statistics.median(ratios):.2f}  "
              f"(rounds {min(ratios):.2f}-{max(ratios):.2f}){note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, 3 repeats")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per contender")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--shapes", default=None,
                        help="comma-separated ROWSxCOLS (default 4096x4096,64x50000)")
    parser.add_argument("--isolated-rounds", type=int, default=None,
                        help="fresh processes per contender for the isolated timing (0: skip)")
    parser.add_argument("--no-arithmetic", dest="arithmetic", action="store_false",
                        help="skip the isolated timing with freed memory kept in the process")
    parser.add_argument("--alone", choices=VARIANTS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    elif args.quick:
        shapes = [(512, 512), (8, 5000)]
    else:
        shapes = [(4096, 4096), (64, 50000)]
    repeat = args.repeat or (3 if args.quick else 15)
    if args.alone:  # child process of the isolated timing
        rows, cols = shapes[0]
        seconds = time_alone(args.alone, rows, cols, repeat=repeat, device=device)
        print(json.dumps({"seconds": seconds}))
        return 0
    rounds = args.isolated_rounds if args.isolated_rounds is not None else (1 if args.quick else 5)
    print(f"softmax forward+backward, float32, device={device}, threads={torch.get_num_threads()}, "
          f"repeat={repeat} (medians; alternating contenders)")
    for rows, cols in shapes:
        res = bench_shape(rows, cols, repeat=repeat, device=device)
        print(f"\n{rows}x{cols}")
        print(f"  {'variant':<10} {'median ms':>10} {'min ms':>8} {'cpu ms':>8} {'nodes':>6} "
              f"{'saved MiB':>10} {'peak MiB':>9}")
        for name in VARIANTS:
            r = res[name]
            print(f"  {name:<10} {r['median'] * 1e3:>10.2f} {r['min'] * 1e3:>8.2f} "
                  f"{r['cpu'] * 1e3:>8.2f} {r['nodes']:>6d} {r['saved'] / 2**20:>10.2f} "
                  f"{r['peak'] / 2**20:>9.2f}")
        med = {name: res[name]["median"] for name in VARIANTS}
        cpu = {name: res[name]["cpu"] for name in VARIANTS}
        target = "  (target <= 2.0)" if (rows, cols) == (4096, 4096) else ""
        print("  ratios of median wall time (and of median process CPU time, steadier when the "
              "machine is shared):")
        for a, b, note in [("blocked", "torch", target), ("blocked", "unblocked", "  (target < 1)"),
                           ("fused", "torch", ""), ("unblocked", "torch", "")]:
            label = f"{a}/{b}"
            print(f"  ratio {label:<17} = {med[a] / med[b]:.2f}  (cpu {cpu[a] / cpu[b]:.2f}){note}")
        if rounds > 0:
            print_isolated(bench_isolated(rows, cols, rounds=rounds, repeat=repeat, args=args),
                           "each contender alone (the steady state of its own loop)", target)
            if args.arithmetic and sys.platform.startswith("linux"):
                print_isolated(bench_isolated(rows, cols, rounds=rounds, repeat=repeat, args=args,
                                              env=NO_FRESH_PAGES_ENV),
                               "the same with freed memory kept (arithmetic only, glibc)", "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
