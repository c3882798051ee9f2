"""Benchmark of ``toolkit audit --watch EVERY``: what watching a whole run costs.

A training script (written into a temporary folder: an MLP of ``--depth`` Linear+ReLU layers of
width ``--width``, batch ``--batch``, cross-entropy, Adam, ``--iters`` iterations of
``zero_grad(); backward(); step()``) is run in this process, as ``toolkit audit`` runs it
(``runpy`` as ``__main__``), plainly and under the watch with ``--watch EVERY``, in interleaved
rounds (``toolkit.lab.measure.race``). Every iteration pays the hooks' bookkeeping (one look at
the call stack per ``backward()``, the step hooks); every EVERY-th iteration is audited in full
(the graph read before the backward, ``.grad`` before and after it, module calls recorded).

It prints the median over rounds of the per-round ratio watched / plain and its range, by the
wall clock and by the process's CPU time (which does not count the time it waited for a core
on a shared machine); the goal is at most 1.02 at ``--watch 100``. Timings are noisy on a
shared machine, so it also prints the hooks' own cost per iteration that is not audited, timed
on the same script at batch 1 (where the hooks are most of the work; the slope between a long
and a short run, so that what a run pays once cancels out) with two small ``Linear`` layers (4
tensors stepped) and with 51 thin ones (102 tensors: the part that grows with the tensors an
optimizer holds), against one plain iteration of the MLP.

Then ``--steps N``: the same script for N iterations, each audited in full, against the same N
iterations run plainly (the goal: at most 1.5). An iteration of that MLP takes a few
milliseconds, so what the audit pays once per run and per module call weighs most there; the
same comparison follows on a small convolutional network (six blocks of convolution, batch norm
and ReLU, batch 32 of 32x32 images, SGD with momentum), an iteration of the size a CPU user
meets.

    python benchmarks/bench_audit_watch.py [--quick] [--every 100] [--iters 1000] [--rounds 7]
                                           [--steps 2] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import functools
import platform
import runpy
import sys
import tempfile
from pathlib import Path

import torch

from toolkit.audit.script.runner import run_script
from toolkit.audit.script.session import Watch
from toolkit.lab.measure import race

SCRIPT = '''
import sys
import torch
from torch import nn

width, depth, batch, iters = (int(a) for a in sys.argv[1:5])
device = torch.device(sys.argv[5])
torch.manual_seed(0)
layers = [nn.Linear(32, width), nn.ReLU()]
for _ in range(depth - 1):
    layers += [nn.Linear(width, width), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(width, 10)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(4096, 32, device=device)
y = torch.randint(0, 10, (4096,), device=device)
for i in range(iters):
    idx = torch.randint(0, len(x), (batch,), device=device)
    loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if device.type == "cuda":
    torch.cuda.synchronize()   # the time of the work queued, not of its queueing
'''

CNN_SCRIPT = '''
import sys
import torch
from torch import nn

iters, device = int(sys.argv[1]), torch.device(sys.argv[2])
torch.manual_seed(0)


def block(c_in, c_out, stride):
    return [nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]


model = nn.Sequential(*block(3, 32, 1), *block(32, 32, 1), *block(32, 64, 2), *block(64, 64, 1),
                      *block(64, 128, 2), *block(128, 128, 1), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(128, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(256, 3, 32, 32, device=device)
y = torch.randint(0, 10, (256,), device=device)
for i in range(iters):
    idx = torch.randint(0, len(x), (32,), device=device)
    loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if device.type == "cuda":
    torch.cuda.synchronize()
'''


def _run_plain(script: str, argv: list[str]) -> None:
    """Run ``script`` as ``python script ARGV`` would, unaudited, in this process."""
    saved = sys.argv[:]
    sys.argv = [script, *argv]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        sys.argv = saved


def _where(device: str) -> str:
    """The device the script trained on, in words."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return platform.processor() or platform.machine()


def _hooks_per_iteration(depth: int, width: int, args: argparse.Namespace) -> float:
    """The hooks' own cost per iteration not audited, in us: the script at batch 1 with
    ``depth`` hidden layers of ``width``, run for ``--iters`` iterations and for a fifth of them,
    plainly and hooked; per round, the extra time of the long run less that of the short one,
    over the iterations between them (what a run pays once, its first iteration's audit and the
    end's rules, cancels out); the median over rounds."""
    short = max(args.iters // 5, 1)
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(tmp, "train.py"))
        Path(script).write_text(SCRIPT, encoding="utf-8")
        contenders = {}
        for n in (short, args.iters):
            argv = [str(v) for v in (width, depth, 1, n, args.device)]
            contenders[f"plain {n}"] = functools.partial(_run_plain, script, argv)
            contenders[f"hooks {n}"] = functools.partial(
                lambda a: run_script(script, a, Watch(every=10**9)), argv)
        wall = race(contenders, rounds=args.rounds).wall
    per_iter = sorted(
        ((hl - pl) - (hs - ps)) / (args.iters - short)
        for hl, pl, hs, ps in zip(wall[f"hooks {args.iters}"], wall[f"plain {args.iters}"],
                                  wall[f"hooks {short}"], wall[f"plain {short}"]))
    return per_iter[len(per_iter) // 2] * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--steps", type=int, default=2,
                   help="iterations audited in full for the --steps comparison (default 2)")
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="200 iterations, 3 rounds")
    p.add_argument("--device", default="cpu", help="where the script trains: cpu or cuda")
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device}: torch reports no CUDA device here")
    if args.quick:
        args.iters, args.rounds = 200, 3
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(tmp, "train.py"))
        Path(script).write_text(SCRIPT, encoding="utf-8")
        argv = [str(v) for v in (args.width, args.depth, args.batch, args.iters, args.device)]

        def plain() -> None:
            _run_plain(script, argv)

        def watched() -> None:
            watch = Watch(every=args.every)
            run_script(script, argv, watch)
            assert watch.backwards == args.iters and not any(
                f.failure for f in watch.findings.values())

        result = race({"plain": plain, f"--watch {args.every}": watched}, rounds=args.rounds)
    ratio = result.ratio(f"--watch {args.every}", "plain")
    plain_us = result.median("plain") / args.iters * 1e6
    print(f"toolkit audit --watch {args.every}: {args.iters} iterations of an MLP "
          f"({args.depth}x{args.width}, batch {args.batch}), {args.rounds} rounds, "
          f"{args.threads} thread(s), torch {torch.__version__}, {_where(args.device)}")
    print(result.table(unit="s", scale=1.0))
    print(f"  watched / plain: {ratio}; goal <= 1.02")
    # the process's CPU time as well: on a machine shared with other work, the wall clock
    # also counts the time this process waited for a core
    cpu = result.ratio(f"--watch {args.every}", "plain", clock="cpu")
    print(f"  watched / plain, CPU time: {cpu}")
    # the hooks alone, where they are most of the work: batch 1, two small layers (4 tensors
    # stepped), then 50 thin ones (102 tensors: what grows with the tensors an optimizer holds)
    for depth, width in ((0, 32), (50, 16)):
        hook_us = _hooks_per_iteration(depth, width, args)
        tensors = 2 * (2 + max(depth - 1, 0))   # weight and bias of each Linear
        print(f"  the hooks, an iteration not audited, {tensors} tensors stepped: {hook_us:.1f} us "
              f"(median over rounds), {hook_us / plain_us:.2%} of a plain iteration of the MLP "
              f"({plain_us:.0f} us)")

    # --steps N: N iterations, every one audited in full, against the same N iterations run
    # plainly (start-up, the imports, paid before either), the goal at most 1.5
    mlp = [str(v) for v in (args.width, args.depth, args.batch, args.steps, args.device)]
    _steps(SCRIPT, mlp, args, "the same MLP")
    _steps(CNN_SCRIPT, [str(args.steps), args.device], args,
           "a small CNN (6 conv blocks, batch 32 of 32x32)")


def _steps(source: str, argv: list[str], args: argparse.Namespace, what: str) -> None:
    """Print ``--steps N`` against a plain run of the script ``source`` (``argv``: its
    arguments, for N iterations)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(tmp, "train.py"))
        Path(script).write_text(source, encoding="utf-8")

        def audited() -> None:
            watch = Watch(args.steps)
            run_script(script, argv, watch)
            assert watch.backwards == args.steps

        steps = race({"plain": lambda: _run_plain(script, argv), f"--steps {args.steps}": audited},
                     rounds=args.rounds)
    print(f"toolkit audit --steps {args.steps}: {args.steps} iterations of {what}, each "
          f"audited in full")
    print(steps.table(unit="ms", scale=1e3))
    print(f"  audited / plain: {steps.ratio(f'--steps {args.steps}', 'plain')}; goal <= 1.5")
    print(f"  audited / plain, CPU time: "
          f"{steps.ratio(f'--steps {args.steps}', 'plain', clock='cpu')}")

if __name__ == "__main__":
    main()
