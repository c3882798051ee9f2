"""Benchmark of the step audit: its cost in forward+backward passes of the step it audits.

A deep MLP (``--depth`` Linear+Tanh layers, width ``--width``, batch ``--batch``) in two steps:

1. ``regression``: ``loss = mean (f(x) − y)²`` with one SGD optimizer over the MLP;
2. ``target``: ``loss = mean (f(x) − as_constant(f_target, x))²``, a frozen copy behind the
   named block ``bench.target`` (the audit records the graph behind the cut, as ``trace_cuts``
   does, so this step costs it one more forward with a graph).

The contenders, timed in interleaved rounds (``toolkit.lab.measure.race``) and divided round by
round by ``step`` (forward + ``torch.autograd.grad`` over the stepped parameters):

- ``forward only``: the loss without its backward;
- ``audit_step``: the audit with its defaults (two calls of the step inside the recording, the
  graph walks, module state saved and put back);
- ``audit_step, no restore``: the same with ``restore_state=False``.

The audit never runs a backward, so it is expected to cost about two forwards plus the
recording's and the walks' overhead. Timings are noisy on a shared machine; the script prints
medians of per-round ratios and their range.

    python benchmarks/bench_audit.py [--quick] [--device cpu|cuda] [--threads N]
"""

from __future__ import annotations

import argparse
import copy
import json
import platform

import torch
from torch import nn

from toolkit import as_constant, audit_step
from toolkit._utils.array_validation import resolve_device
from toolkit.lab.measure import count_graph_nodes, race


def deep_mlp(depth: int, width: int, device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())]
                         ).to(device)


def bench_step(kind: str, depth: int, width: int, batch: int, rounds: int,
               device: torch.device) -> dict[str, object]:
    model = deep_mlp(depth, width, device)
    target = copy.deepcopy(model).requires_grad_(False)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01)
    x = torch.randn(batch, width, device=device)
    y = torch.randn(batch, width, device=device)

    def loss_fn() -> torch.Tensor:
        goal = y if kind == "regression" else as_constant(target, x, name="bench.target")
        return (model(x) - goal).pow(2).mean()

    def step() -> None:
        torch.autograd.grad(loss_fn(), params)

    audit = audit_step(loss_fn, opt)
    assert audit.ok, str(audit)
    contenders = {
        "step": step,
        "forward only": loss_fn,
        "audit_step": lambda: audit_step(loss_fn, opt),
        "audit_step, no restore": lambda: audit_step(loss_fn, opt, restore_state=False),
    }
    result = race(contenders, rounds=rounds, device=device)
    ratios = {name: result.ratio(name, "step") for name in contenders if name != "step"}
    return {"kind": kind, "depth": depth, "width": width, "batch": batch, "rounds": rounds,
            "graph_nodes": count_graph_nodes(loss_fn()), "step_ms": result.median("step") * 1e3,
            "ratios": {k: r.median for k, r in ratios.items()},
            "ranges": {k: [r.min, r.max] for k, r in ratios.items()},
            "cpu_ratios": {k: result.ratio(k, "step", clock="cpu").median for k in ratios},
            "table": result.table()}


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--depth", type=int, default=50, help="Linear+Tanh layers of the MLP")
    parser.add_argument("--width", type=int, default=256, help="width of the MLP")
    parser.add_argument("--batch", type=int, default=256, help="batch size")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device, where="bench_audit")
    if args.quick:
        sizes = {"depth": 6, "width": 32, "batch": 16, "rounds": 3}
    else:
        sizes = {"depth": args.depth, "width": args.width, "batch": args.batch,
                 "rounds": args.rounds}
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{platform.processor() or platform.machine()}, device={device}")
    results = {}
    for kind in ("regression", "target"):
        r = bench_step(kind, **sizes, device=device)
        results[kind] = {k: v for k, v in r.items() if k != "table"}
        print(f"\n{kind} step: MLP of {r['depth']} Linear+Tanh layers, width {r['width']}, batch "
              f"{r['batch']} ({r['graph_nodes']} autograd nodes); one forward+backward = "
              f"{r['step_ms']:.3f} ms")
        print(r["table"])
        print(f"cost / one forward+backward (median of {r['rounds']} per-round ratios, "
              f"their range; process CPU time, steadier on a busy machine):")
        for name, ratio in r["ratios"].items():
            lo, hi = r["ranges"][name]
            print(f"  ratio {name:<24} {ratio:6.2f}x  (rounds {lo:.2f}..{hi:.2f}; "
                  f"cpu {r['cpu_ratios'][name]:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
