"""Benchmark of the gradient-flow lens: its cost relative to one forward+backward pass.

Two measurements, each printed with its ratios:

1. A deep MLP (``--depth`` Linear+Tanh layers, width ``--width``, batch ``--batch``) trained
   against a target copy behind the named block ``bench.target``
   (``loss = mean (f(x) − as_constant(f_target, x))²``). The contenders, timed in interleaved
   rounds (``toolkit.lab.measure.race``) and divided round by round by ``step`` (forward +
   ``torch.autograd.grad`` over the online parameters):

   - ``forward only``: the loss without its backward (the lens's checks walk its graph);
   - ``step without the block``: the same inside ``disable_blocks``, gradients of both
     networks (the target's forward records a graph and its backward runs too);
   - ``gradient_flow``: the table over the groups online/target, 1 + 1 block = 2 passes: one
     ``step`` and one ``step without the block``, plus the comparison of the gradients;
   - ``assert_no_gradient``: forward, then the check that the target gets no gradient
     (a graph walk, no backward: expected below 1x);
   - ``gradient_path``: forward, then the path to the first layer's weight;
   - ``trace + gradient_graph``: forward inside ``trace_cuts()`` (the target's graph is
     recorded) and the graph as data;
   - ``draw_gradient_graph``: the whole figure (layout and matplotlib artists, not saved).

2. A chain of ``--chain`` elementwise ops (two autograd nodes per op: thousands of nodes):
   ``gradient_path`` and ``assert_no_gradient`` against a backward pass over the same retained
   graph.

Timings are noisy on a shared machine; the script prints medians of per-round ratios.

    python benchmarks/bench_lens.py [--quick] [--device cpu|cuda] [--threads N]
"""

from __future__ import annotations

import argparse
import copy
import json
import platform

import torch
from torch import nn

from toolkit import as_constant, disable_blocks
from toolkit._utils.array_validation import resolve_device
from toolkit.lab.measure import count_graph_nodes, race
from toolkit.lens import (
    assert_no_gradient,
    draw_gradient_graph,
    gradient_flow,
    gradient_graph,
    gradient_path,
    trace_cuts,
)


def deep_mlp(depth: int, width: int, device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())]
                         ).to(device)


def bench_mlp(depth: int, width: int, batch: int, rounds: int, draw_rounds: int,
              device: torch.device) -> dict[str, object]:
    online = deep_mlp(depth, width, device)
    target = copy.deepcopy(online)
    x = torch.randn(batch, width, device=device)
    params = list(online.parameters())
    groups = {"online": online, "target": target}

    def loss_fn() -> torch.Tensor:
        return (online(x) - as_constant(target, x, name="bench.target")).pow(2).mean()

    def step() -> None:
        torch.autograd.grad(loss_fn(), params)

    def step_unblocked() -> None:  # what gradient_flow's second pass does
        with disable_blocks("bench.target"):
            torch.autograd.grad(loss_fn(), [*params, *target.parameters()])

    def check() -> None:
        assert_no_gradient(loss_fn(), target)

    def traced() -> None:
        with trace_cuts():
            gradient_graph(loss_fn(), groups)

    contenders = {
        "step": step,
        "forward only": loss_fn,
        "step without the block": step_unblocked,
        "gradient_flow": lambda: gradient_flow(loss_fn, groups),
        "assert_no_gradient": check,
        "gradient_path": lambda: gradient_path(loss_fn(), online[0].weight),
        "trace + gradient_graph": traced,
    }
    result = race(contenders, rounds=rounds, device=device)
    with trace_cuts():
        graph = gradient_graph(loss_fn(), groups)
    drawing = race({"step": step, "draw_gradient_graph": lambda: draw_gradient_graph(graph)},
                   rounds=draw_rounds, device=device)
    return {"depth": depth, "width": width, "batch": batch, "rounds": rounds,
            "graph_nodes": count_graph_nodes(loss_fn()), "traced_graph_nodes": len(graph.nodes),
            "step_ms": result.median("step") * 1e3,
            "ratios": {name: result.ratio(name, "step").median for name in contenders
                       if name != "step"}
            | {"draw_gradient_graph": drawing.ratio("draw_gradient_graph", "step").median},
            "cpu_ratios": {name: result.ratio(name, "step", clock="cpu").median
                           for name in contenders if name != "step"}
            | {"draw_gradient_graph": drawing.ratio("draw_gradient_graph", "step",
                                                    clock="cpu").median},
            "table": result.table()}


def bench_chain(n_ops: int, repeat: int, device: torch.device) -> dict[str, float]:
    w = torch.ones(16, device=device, requires_grad=True)
    frozen = torch.ones(16, device=device, requires_grad=True)
    h = w
    for _ in range(n_ops):
        h = h * 1.0001 + 1e-4
    loss = (h * frozen.detach()).sum()
    timed = race({"backward": lambda: torch.autograd.grad(loss, w, retain_graph=True),
                  "gradient_path": lambda: gradient_path(loss, w),
                  "assert_no_gradient": lambda: assert_no_gradient(loss, frozen)},
                 rounds=repeat, device=device)
    timings = {name: timed.median(name) for name in timed.names}
    assert gradient_path(loss, w) is not None and gradient_path(loss, frozen) is None
    return {"nodes": count_graph_nodes(loss), **{f"{k}_ms": v * 1e3 for k, v in timings.items()}}


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--depth", type=int, default=50, help="Linear+Tanh layers of the MLP")
    parser.add_argument("--width", type=int, default=256, help="width of the MLP")
    parser.add_argument("--batch", type=int, default=256, help="batch size")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--chain", type=int, default=5000, help="ops in the long chain")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device, where="bench_lens")
    if args.quick:
        sizes = {"depth": 8, "width": 32, "batch": 16, "rounds": 3, "draw_rounds": 1}
        chain = 500
    else:
        sizes = {"depth": args.depth, "width": args.width, "batch": args.batch,
                 "rounds": args.rounds, "draw_rounds": max(3, args.rounds // 5)}
        chain = args.chain
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{platform.processor() or platform.machine()}, device={device}")
    mlp = bench_mlp(**sizes, device=device)
    print(f"\nMLP of {mlp['depth']} Linear+Tanh layers, width {mlp['width']}, batch "
          f"{mlp['batch']} ({mlp['graph_nodes']} autograd nodes; {mlp['traced_graph_nodes']} "
          f"with the target's graph traced); one forward+backward = {mlp['step_ms']:.3f} ms")
    print(mlp["table"])
    print("lens cost / one forward+backward (median of per-round ratios; wall clock, and "
          "process CPU time, steadier on a busy machine):")
    for name, ratio in mlp["ratios"].items():
        print(f"  ratio {name:<24} {ratio:8.2f}x   (cpu {mlp['cpu_ratios'][name]:.2f}x)")
    ch = bench_chain(chain, 3 if args.quick else 10, device)
    print(f"\nchain of {chain} elementwise ops ({ch['nodes']} autograd nodes):")
    for key in ("backward", "gradient_path", "assert_no_gradient"):
        print(f"  {key:<20} {ch[key + '_ms']:9.3f} ms")
    for key in ("gradient_path", "assert_no_gradient"):
        print(f"  ratio {key} / backward = {ch[key + '_ms'] / ch['backward_ms']:.2f}x")
    results = {"mlp": {k: v for k, v in mlp.items() if k != "table"}, "chain": ch}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
