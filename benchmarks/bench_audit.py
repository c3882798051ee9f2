"""Benchmark of the step audit: its cost in forward+backward passes of the step it audits.

Four steps:

1. ``regression``: a deep MLP (``--depth`` Linear+Tanh layers, width ``--width``, batch
   ``--batch``), ``loss = mean (f(x) − y)²`` with one SGD optimizer over the MLP;
2. ``target``: the same with ``loss = mean (f(x) − as_constant(f_target, x))²``, a frozen copy
   behind the named block ``bench.target`` (the audit records the graph behind the cut, as
   ``trace_cuts`` does, so this step costs it one more forward with a graph);
3. ``conv``: a convolutional classifier (``--conv-depth`` 3×3 conv + BatchNorm + ReLU blocks of
   ``--channels`` channels on 32×32 images, batch ``--conv-batch``), cross-entropy, SGD;
4. ``gan``: pytorch/examples' DCGAN (64×64, ``--channels`` as ngf = ndf) with spectral norm on
   the discriminator (``torch.nn.utils.parametrizations``), its two losses and two Adam
   optimizers: the generator's loss passes through the discriminator (pass-through, parameter
   regions, the target forms: every analysis the audit has).

The contenders, timed in interleaved rounds (``toolkit.lab.measure.race``) and divided round by
round by ``step`` (forward + ``torch.autograd.grad`` over the stepped parameters):

- ``forward only``: the loss without its backward;
- ``audit_step``: the audit with its defaults (two calls of the step inside the recording, the
  graph walks, module state saved and put back);
- ``audit_step, no restore``: the same with ``restore_state=False``.

The audit never runs a backward, so it is expected to cost about two forwards plus the
recording's and the walks' overhead; on the conv steps, where the forward's kernels dominate,
it must stay within two forward+backward passes. Timings are noisy on a shared machine; the script prints
medians of per-round ratios and their range.

    python benchmarks/bench_audit.py [--quick] [--device cpu|cuda] [--threads N] [--kinds ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from toolkit import as_constant, audit_step
from toolkit._utils.array_validation import resolve_device
from toolkit.lab.measure import count_graph_nodes, race


def deep_mlp(depth: int, width: int, device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.Tanh())]
                         ).to(device)


def conv_net(depth: int, channels: int, device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    blocks: list[nn.Module] = [nn.Conv2d(3, channels, 3, padding=1)]
    for _ in range(depth):
        blocks += [nn.BatchNorm2d(channels), nn.ReLU(),
                   nn.Conv2d(channels, channels, 3, padding=1)]
    blocks += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10)]
    return nn.Sequential(*blocks).to(device)


def dcgan(channels: int, device: torch.device) -> tuple[nn.Module, nn.Module]:
    """pytorch/examples' DCGAN generator and discriminator (64×64, nz = 16), spectral norm on
    every discriminator convolution."""
    torch.manual_seed(0)
    sn = nn.utils.parametrizations.spectral_norm
    g, d, nz = channels, channels, 16
    gen = nn.Sequential(
        *[m for i, o, s, p in ((nz, 8 * g, 1, 0), (8 * g, 4 * g, 2, 1), (4 * g, 2 * g, 2, 1),
                               (2 * g, g, 2, 1))
          for m in (nn.ConvTranspose2d(i, o, 4, s, p, bias=False), nn.BatchNorm2d(o),
                    nn.ReLU(True))],
        nn.ConvTranspose2d(g, 3, 4, 2, 1, bias=False), nn.Tanh())
    disc = nn.Sequential(
        sn(nn.Conv2d(3, d, 4, 2, 1, bias=False)), nn.LeakyReLU(0.2),
        *[m for i, o in ((d, 2 * d), (2 * d, 4 * d), (4 * d, 8 * d))
          for m in (sn(nn.Conv2d(i, o, 4, 2, 1, bias=False)), nn.BatchNorm2d(o),
                    nn.LeakyReLU(0.2))],
        sn(nn.Conv2d(8 * d, 1, 4, 1, 0, bias=False)), nn.Flatten())
    return gen.to(device), disc.to(device)


def _losses_and_optimizers(kind: str, sizes: dict[str, int], device: torch.device
                           ) -> tuple[Callable[[], Any], Any, dict[str, list[torch.Tensor]]]:
    """``(loss_fn, optimizers, loss name -> the tensors its backward differentiates)``."""
    if kind == "conv":
        model = conv_net(sizes["conv_depth"], sizes["channels"], device)
        x = torch.randn(sizes["conv_batch"], 3, 32, 32, device=device)
        y = torch.randint(0, 10, (sizes["conv_batch"],), device=device)
        params = list(model.parameters())
        return (lambda: F.cross_entropy(model(x), y)), torch.optim.SGD(params, lr=0.1), \
            {"loss": params}
    gen, disc = dcgan(sizes["channels"], device)
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    batch = sizes["conv_batch"]
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1
    ones, zeros = torch.ones(batch, 1, device=device), torch.zeros(batch, 1, device=device)

    def gan_losses() -> dict[str, torch.Tensor]:
        fake = gen(torch.randn(batch, 16, 1, 1, device=device))
        err_d = (F.binary_cross_entropy_with_logits(disc(real), ones)
                 + F.binary_cross_entropy_with_logits(disc(fake.detach()), zeros))
        return {"d": err_d, "g": F.binary_cross_entropy_with_logits(disc(fake), ones)}

    return gan_losses, {"d": opt_d, "g": opt_g}, {"d": list(disc.parameters()),
                                                 "g": list(gen.parameters())}


def bench_step(kind: str, depth: int, width: int, batch: int, rounds: int,
               device: torch.device, **conv: int) -> dict[str, object]:
    if kind in ("conv", "gan"):
        loss_fn, opt, wrt = _losses_and_optimizers(kind, conv, device)
        return _race(kind, loss_fn, opt, wrt, rounds, device,
                     {"depth": conv["conv_depth"], "width": conv["channels"],
                      "batch": conv["conv_batch"]})
    model = deep_mlp(depth, width, device)
    target = copy.deepcopy(model).requires_grad_(False)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01)
    x = torch.randn(batch, width, device=device)
    y = torch.randn(batch, width, device=device)

    def loss_fn() -> torch.Tensor:
        goal = y if kind == "regression" else as_constant(target, x, name="bench.target")
        return (model(x) - goal).pow(2).mean()

    return _race(kind, loss_fn, opt, {"loss": params}, rounds, device,
                 {"depth": depth, "width": width, "batch": batch})


def _race(kind: str, loss_fn: Callable[[], Any], opt: Any, wrt: dict[str, list[torch.Tensor]],
          rounds: int, device: torch.device, sizes: dict[str, int]) -> dict[str, object]:
    def step() -> None:  # forward, then each loss's backward over what its optimizer steps
        out = loss_fn()
        losses = out if isinstance(out, dict) else {"loss": out}
        for i, (name, loss) in enumerate(losses.items()):
            torch.autograd.grad(loss, wrt[name], retain_graph=i < len(losses) - 1)

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
    out = loss_fn()
    return {"kind": kind, **sizes, "rounds": rounds,
            "graph_nodes": count_graph_nodes(list(out.values()) if isinstance(out, dict) else out),
            "step_ms": result.median("step") * 1e3,
            "ratios": {k: r.median for k, r in ratios.items()},
            "ranges": {k: [min(r.kept), max(r.kept)] for k, r in ratios.items()},
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
    parser.add_argument("--conv-depth", type=int, default=8, help="conv blocks of the CNN")
    parser.add_argument("--channels", type=int, default=32,
                        help="channels of the CNN, ngf = ndf of the DCGAN")
    parser.add_argument("--conv-batch", type=int, default=32, help="batch of the conv steps")
    parser.add_argument("--kinds", default="regression,target,conv,gan",
                        help="comma-separated steps to time (regression, target, conv, gan)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device, where="bench_audit")
    if args.quick:
        sizes = {"depth": 6, "width": 32, "batch": 16, "rounds": 3, "conv_depth": 2,
                 "channels": 4, "conv_batch": 4}
    else:
        sizes = {"depth": args.depth, "width": args.width, "batch": args.batch,
                 "rounds": args.rounds, "conv_depth": args.conv_depth,
                 "channels": args.channels, "conv_batch": args.conv_batch}
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{platform.processor() or platform.machine()}, device={device}")
    results = {}
    what = {"regression": "MLP of {depth} Linear+Tanh layers, width {width}, batch {batch}",
            "target": "MLP of {depth} Linear+Tanh layers, width {width}, batch {batch}",
            "conv": "CNN of {depth} conv+BN+ReLU blocks, {width} channels, 32x32, batch {batch}",
            "gan": "DCGAN 64x64 (spectral norm on D), ngf = ndf = {width}, batch {batch}, "
                   "losses d and g"}
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(what))
    if unknown:
        parser.error(f"--kinds: unknown step(s) {unknown}; choose from {sorted(what)}")
    for kind in kinds:
        r = bench_step(kind, **sizes, device=device)
        results[kind] = {k: v for k, v in r.items() if k != "table"}
        print(f"\n{kind} step: {what[kind].format(**r)} ({r['graph_nodes']} autograd nodes); "
              f"one forward+backward = {r['step_ms']:.3f} ms")
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
