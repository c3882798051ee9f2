"""Benchmark of the adversarial module: attack speed against peers, cost of the missing block.

Three measurements in one run, each printed with its ratio:

1. PGD-20 (L∞, ε = 8/255, α = 2/255, random start) on an MLP 784-512-512-10, batch 512: our
   ``pgd`` against torchattacks' ``PGD`` (when importable) and against a plain reference loop
   written here (the textbook algorithm, no checks, no restarts machinery). Target: ours ≤ 1.0×.
2. One PGD-AT epoch on the digits (MLP 64-256-256-10, 10 steps, batch 64), with the block and
   inside ``disable_blocks("adversarial.*")``. Target: unblocked / blocked ≥ 2.
3. Memory of one PGD-AT training step vs the number of PGD steps (1, 5, 10, 20), blocked vs
   unblocked: peak live tensor bytes and bytes saved for backward (``measure_memory``) and the
   autograd nodes behind the loss. Target: flat blocked, growing unblocked.

Timings alternate the contenders call by call and report medians; they are noisy on a shared
machine. ``--quick`` runs a smoke version (tiny sizes, no meaningful ratio) in a few seconds.

    python benchmarks/bench_adversarial.py [--quick] [--threads N] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import statistics
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from toolkit import disable_blocks
from toolkit.algorithms.adversarial import adversarial_training, pgd
from toolkit.lab.data import digits
from toolkit.lab.measure import count_graph_nodes, measure_memory, race


def mlp(sizes: list[int], device: torch.device, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(device).eval()


def reference_pgd(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float, alpha: float,
                  steps: int) -> torch.Tensor:
    """The textbook L∞ PGD loop with a uniform random start (Madry et al. 2018)."""
    x_adv = (x + torch.empty_like(x).uniform_(-eps, eps)).clamp(0, 1)
    for _ in range(steps):
        x_adv.requires_grad_(True)
        loss = F.cross_entropy(model(x_adv), y)
        (g,) = torch.autograd.grad(loss, x_adv)
        with torch.no_grad():
            x_adv = x_adv + alpha * g.sign()
            x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0, 1)
    return x_adv


def bench_attack(args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    batch = 32 if args.quick else 512
    model = mlp([784, 512, 512, 10], device)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, 784, generator=g).to(device)
    y = torch.randint(0, 10, (batch,), generator=g).to(device)
    eps, alpha, steps = 8 / 255, 2 / 255, 3 if args.quick else 20
    gen = torch.Generator(device=device).manual_seed(1)
    contenders: dict[str, Callable[[], object]] = {
        "ours": lambda: pgd(model, x, y, eps, alpha, steps, generator=gen),
        "reference loop": lambda: reference_pgd(model, x, y, eps, alpha, steps),
    }
    if importlib.util.find_spec("torchattacks") is not None:
        import torchattacks

        attack = torchattacks.PGD(model, eps=eps, alpha=alpha, steps=steps, random_start=True)
        contenders["torchattacks"] = lambda: attack(x, y)
    else:
        print("  torchattacks is not importable (pip install '.[bench]'): comparing against the "
              "reference loop only")
    result = race(contenders, rounds=2 if args.quick else args.repeat, device=device)
    print(f"\n[1] PGD-{steps} attack, MLP 784-512-512-10, batch {batch}, {device}, "
          f"{result.rounds} interleaved rounds")
    print(result.table())
    for name in contenders:
        if name != "ours":
            print(f"  ratio ours / {name} {result.ratio('ours', name)}")
    return {name: result.median(name) for name in contenders}


def digits_setup(device: torch.device, n: int | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    X, y = digits()
    if n is not None:
        X, y = X[:n], y[:n]
    return X.to(device), y.to(device)


def bench_epoch(args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    X, y = digits_setup(device, 128 if args.quick else None)
    epochs = 1 if args.quick else args.epochs
    seconds: dict[str, list[float]] = {"blocked": [], "unblocked": []}
    warm = mlp([64, 256, 256, 10], device).train()  # first calls pay one-time costs
    for blocks in (contextlib.nullcontext(), disable_blocks("adversarial.*")):
        with blocks:
            adversarial_training(warm, (X[:64], y[:64]), torch.optim.Adam(warm.parameters()),
                                 method="pgd", epochs=1, eps=0.1, steps=2, batch_size=64,
                                 check_size=8, check_steps=1)
    for _ in range(1 if args.quick else 2):  # alternate the two variants
        for variant in seconds:
            model = mlp([64, 256, 256, 10], device).train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            blocks = (disable_blocks("adversarial.*") if variant == "unblocked"
                      else contextlib.nullcontext())
            with blocks:
                hist = adversarial_training(model, (X, y), opt, method="pgd", epochs=epochs,
                                            eps=0.1, alpha=0.02, steps=10, batch_size=64,
                                            check_size=32, check_steps=1,
                                            generator=torch.Generator().manual_seed(0))
            seconds[variant].extend(hist.seconds)
    med = {v: statistics.median(s) for v, s in seconds.items()}
    print(f"\n[2] PGD-AT epoch (10 steps), digits {tuple(X.shape)}, MLP 64-256-256-10, batch 64")
    print(f"  blocked: {med['blocked']:.3f} s   unblocked: {med['unblocked']:.3f} s   "
          f"unblocked / blocked = {med['unblocked'] / med['blocked']:.2f}  (target >= 2)")
    return med


def bench_memory(args: argparse.Namespace, device: torch.device) -> None:
    X, y = digits_setup(device, 128)
    model = mlp([64, 256, 256, 10], device)
    steps_list = [1, 3] if args.quick else [1, 5, 10, 20]

    def loss(steps: int) -> torch.Tensor:
        x_adv = pgd(model, X, y, 0.1, 0.02, steps, generator=torch.Generator().manual_seed(0))
        return F.cross_entropy(model(x_adv), y)

    def step(steps: int) -> None:
        torch.autograd.grad(loss(steps), list(model.parameters()))

    print(f"\n[3] memory of one PGD-AT step vs PGD steps, batch 128, MLP 64-256-256-10, {device}")
    print(f"  {'steps':>5} {'variant':>9} {'peak MiB':>9} {'saved MiB':>10} {'graph nodes':>11}")
    rows: dict[str, list[tuple[int, int, int]]] = {"blocked": [], "unblocked": []}
    for steps in steps_list:
        for variant in rows:
            blocks = (disable_blocks("adversarial.*") if variant == "unblocked"
                      else contextlib.nullcontext())
            with blocks:
                stats = measure_memory(lambda s=steps: step(s), device=device)
                nodes = count_graph_nodes(loss(steps))
            rows[variant].append((stats.peak_bytes, stats.saved_tensor_bytes, nodes))
            print(f"  {steps:>5} {variant:>9} {stats.peak_bytes / 2**20:9.2f} "
                  f"{stats.saved_tensor_bytes / 2**20:10.2f} {nodes:>11}")
    for variant, r in rows.items():
        print(f"  {variant:>9}: peak at {steps_list[-1]} steps / at {steps_list[0]} step = "
              f"{r[-1][0] / r[0][0]:.2f}, saved bytes ratio {r[-1][1] / r[0][1]:.2f}, "
              f"graph nodes ratio {r[-1][2] / r[0][2]:.2f}")
    print(f"  unblocked / blocked peak at {steps_list[-1]} steps = "
          f"{rows['unblocked'][-1][0] / rows['blocked'][-1][0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=15, help="timed calls per contender")
    parser.add_argument("--epochs", type=int, default=3, help="PGD-AT epochs per variant")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}")
    bench_attack(args, device)
    bench_epoch(args, device)
    bench_memory(args, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
