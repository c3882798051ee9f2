"""Benchmark of the softmax module: forward+backward against ``torch.softmax``, and the block's cost.

On a float32 input (default 2048×2048; ``--shapes`` for more) it times one forward and one
backward (``y.backward(g)`` with a fixed ``g``) of

- ``torch``: ``torch.softmax(x, -1)``, the peer (one fused kernel each way);
- ``blocked``: ``stable_softmax(x)``, the reference composition with the ``softmax.max`` block;
- ``unblocked``: the same inside ``disable_blocks("softmax.*")`` (gradient through the max);
- ``fused``: ``stable_softmax(x, impl="fused")``, the analytic backward;
- ``compiled``: ``torch.compile(stable_softmax)`` (inductor), unless ``--no-compile``;

in interleaved rounds (``toolkit.lab.measure.race``; each timed call runs ``--repeat`` steps, so
that one page fault or one descheduling does not decide a round), and prints the medians and the median of the
per-round ratios: compiled / torch (target <= 1.0), blocked / unblocked (target <= 1.0),
blocked / torch and fused / torch. Each contender is also given as a percentage of the
memory-bandwidth bound: a forward+backward must move at least 5 tensors of the input's size
(read x, write y; read g and y, write the gradient), and the bound is those bytes at the copy
bandwidth measured in the same run (``x.clone()``). Autograd nodes and bytes saved for backward
are printed too (``measure_memory``).

    python benchmarks/bench_softmax.py [--quick] [--rounds N] [--repeat N] [--device cpu|cuda]
        [--no-compile]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from toolkit import disable_blocks
from toolkit.algorithms.softmax import stable_softmax
from toolkit.lab.measure import count_graph_nodes, measure_memory, race


def _unblocked(x: torch.Tensor) -> torch.Tensor:
    with disable_blocks("softmax.*"):
        return stable_softmax(x)


def softmaxes(compile_: bool) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    out: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "torch": lambda x: torch.softmax(x, -1),
        "blocked": stable_softmax,
        "unblocked": _unblocked,
        "fused": lambda x: stable_softmax(x, impl="fused"),
    }
    if compile_:
        out["compiled"] = torch.compile(stable_softmax, fullgraph=True)
    return out


def bench_shape(rows: int, cols: int, *, rounds: int, repeat: int, device: str,
                compile_: bool) -> None:
    g = torch.Generator(device="cpu").manual_seed(0)
    x = (torch.randn(rows, cols, generator=g) * 4).to(device).requires_grad_(True)
    grad = torch.randn(rows, cols, generator=g).to(device)
    fns = softmaxes(compile_)

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            x.grad = None
            fn(x).backward(grad)
        return run

    def repeated(fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(repeat):
                fn()
        return run

    plain = x.detach()
    contenders = {name: repeated(step(fn)) for name, fn in fns.items()}
    contenders["copy"] = repeated(lambda: plain.clone())
    result = race(contenders, rounds=rounds, warmup=1, device=device)
    per_call = {name: result.median(name) / repeat for name in contenders}
    nbytes = x.numel() * x.element_size()
    bandwidth = 2 * nbytes / per_call["copy"]  # a copy reads and writes
    bound = 5 * nbytes / bandwidth
    print(f"\n{rows}x{cols} float32 forward+backward on {device}, {rounds} interleaved rounds of "
          f"{repeat} steps each; copy bandwidth {bandwidth / 1e9:.1f} GB/s, "
          f"bound {bound * 1e3:.2f} ms")
    print(f"  {'contender':<10} {'median ms':>10} {'min ms':>8} {'% of bound':>10} {'nodes':>6} "
          f"{'saved MiB':>10}")
    for name, fn in fns.items():
        y = fn(x)
        nodes = count_graph_nodes(y)
        saved = measure_memory(step(fn), device=device).saved_tensor_bytes / 2**20
        med = per_call[name]
        print(f"  {name:<10} {med * 1e3:>10.2f} {result.min(name) / repeat * 1e3:>8.2f} "
              f"{100 * bound / med:>9.0f}% {nodes:>6} {saved:>10.1f}")
    print("  ratios of the medians of per-round ratios:")
    if "compiled" in fns:
        print(f"    compiled / torch {result.ratio('compiled', 'torch')}   (target <= 1.0)")
    print(f"    blocked / unblocked {result.ratio('blocked', 'unblocked')}   (target <= 1.0)")
    print(f"    blocked / torch {result.ratio('blocked', 'torch')}")
    print(f"    fused / torch {result.ratio('fused', 'torch')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small input, 3 rounds, no compile")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=10, help="steps per timed call")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--shapes", default="2048x2048", help="comma-separated RxC list")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"bench_softmax: --device {args.device}: torch reports no CUDA device here")
        return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    compile_ = not (args.no_compile or args.quick)
    shapes = ["256x512"] if args.quick else args.shapes.split(",")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}"
          + ("" if compile_ else ", torch.compile skipped"))
    for shape in shapes:
        rows, cols = (int(v) for v in shape.lower().split("x"))
        try:
            bench_shape(rows, cols, rounds=3 if args.quick else args.rounds,
                        repeat=1 if args.quick else args.repeat, device=args.device,
                        compile_=compile_)
        except Exception as err:  # the compiler toolchain can be missing
            if not compile_:
                raise
            print(f"  torch.compile failed ({type(err).__name__}: {str(err)[:200]}); "
                  f"rerun with --no-compile")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
