"""What ``audit_step`` costs next to one training step of a real model: time and peak memory.

Two models built from ``transformers`` configurations with random weights (nothing is
downloaded): a 6-layer GPT-2 (``GPT2Config(n_layer=6)``, the 124M model's width and
vocabulary) on next-token prediction, and a ResNet-50 (``ResNetConfig()``, the
``microsoft/resnet-50`` layout) on image classification. For each:

- ``train step``: forward, ``loss.backward()``, ``AdamW.step()``, ``zero_grad()``;
- ``audit_step``: ``audit_step(step, optimizer)`` with its defaults (the step called twice, one
  real ``autograd.grad`` per loss, the graph walks, state saved and put back).

Time: interleaved rounds (``toolkit.lab.measure.race``), the median of per-round ratios audit /
step, in wall time (the acceptance's number) and in process CPU time (steadier when other
programs share the cores; the load average is printed with each model). Memory: each contender runs once in a fresh process (``spawn``), so that no allocator
cache of an earlier run hides its peak; on CUDA the peak is ``torch.cuda.max_memory_allocated``
above what was allocated before the call, on the CPU the resident set sampled every
millisecond above the resident set before the call. The AdamW moments are made by the first
step and count in its peak (a training step's memory is its state's too).

    python benchmarks/bench_audit_models.py [--quick] [--device cpu|cuda] [--models gpt2,resnet50]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from toolkit import audit_step
from toolkit._utils.array_validation import resolve_device
from toolkit.lab.measure import race


def build(model: str, sizes: dict[str, int], device: torch.device
          ) -> tuple[Callable[[], torch.Tensor], torch.optim.Optimizer, torch.nn.Module]:
    """``(loss function, AdamW over the model, the model)`` with random weights, seed 0."""
    import transformers

    torch.manual_seed(0)
    if model == "gpt2":
        config = transformers.GPT2Config(n_layer=6, n_positions=sizes["seq"])
        net = transformers.GPT2LMHeadModel(config).to(device).train()
        ids = torch.randint(0, config.vocab_size, (sizes["batch"], sizes["seq"]), device=device)

        def loss_fn() -> torch.Tensor:
            return net(input_ids=ids, labels=ids).loss
    elif model == "resnet50":
        config = transformers.ResNetConfig(num_labels=10)
        net = transformers.ResNetForImageClassification(config).to(device).train()
        x = torch.randn(sizes["batch"], 3, sizes["image"], sizes["image"], device=device)
        y = torch.randint(0, 10, (sizes["batch"],), device=device)

        def loss_fn() -> torch.Tensor:
            return F.cross_entropy(net(pixel_values=x).logits, y)
    else:
        raise ValueError(f"bench_audit_models: model must be gpt2 or resnet50, got {model!r}")
    return loss_fn, torch.optim.AdamW(net.parameters(), lr=1e-4), net


def contenders(loss_fn: Callable[[], torch.Tensor], opt: torch.optim.Optimizer
               ) -> dict[str, Callable[[], Any]]:
    def train_step() -> None:
        loss = loss_fn()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return {"train step": train_step, "audit_step": lambda: audit_step(loss_fn, opt)}


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_in_child(model: str, name: str, sizes: dict[str, int], device: str,
                   threads: int | None, out: Any) -> None:
    if threads is not None:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    loss_fn, opt, _ = build(model, sizes, dev)
    run = contenders(loss_fn, opt)[name]
    if dev.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        out.put(torch.cuda.max_memory_allocated() - before)
        return
    before, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    run()
    done.set()
    sampler.join()
    out.put(max(peak[0], _rss()) - before)


def peak_memory(model: str, name: str, sizes: dict[str, int], device: torch.device,
                threads: int | None) -> int:
    """Bytes above what the process held before one call of contender ``name``, in a fresh
    process."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_peak_in_child,
                            args=(model, name, sizes, str(device), threads, queue))
    child.start()
    found = queue.get()
    child.join()
    return int(found)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, 3 rounds")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--models", default="gpt2,resnet50", help="comma-separated: gpt2, resnet50")
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved timing rounds (default 5, 3 with --quick)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device, where="bench_audit_models")
    sizes = ({"batch": 2, "seq": 64, "image": 64} if args.quick
             else {"batch": 4, "seq": 128, "image": 128})
    rounds = args.rounds if args.rounds is not None else 3 if args.quick else 5
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{platform.processor() or platform.machine()}, device={device}, sizes {sizes}")
    results = {}
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        loss_fn, opt, net = build(model, sizes, device)
        audit = audit_step(loss_fn, opt)
        print(f"\n{model}: {sum(p.numel() for p in net.parameters()) / 1e6:.1f}M parameters; "
              f"audit {'clean' if audit.ok else 'NOT clean'}")
        load = os.getloadavg()[0]
        timed = race(contenders(loss_fn, opt), rounds=rounds, device=device)
        time_ratio = timed.ratio("audit_step", "train step").median
        cpu_ratio = timed.ratio("audit_step", "train step", clock="cpu").median
        memory = {name: peak_memory(model, name, sizes, device, args.threads)
                  for name in ("train step", "audit_step")}
        memory_ratio = memory["audit_step"] / max(memory["train step"], 1)
        print(timed.table())
        print(f"  time   audit_step / train step: {time_ratio:.2f}x (median of {rounds} rounds; "
              f"CPU time {cpu_ratio:.2f}x; load average {load:.1f} -> "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"  memory audit_step / train step: {memory_ratio:.2f}x "
              f"({memory['audit_step'] / 2**20:.0f} MiB / {memory['train step'] / 2**20:.0f} MiB)")
        results[model] = {"time_ratio": time_ratio, "cpu_ratio": cpu_ratio,
                          "memory_ratio": memory_ratio}
        del loss_fn, opt, net
    print("\n" + "\n".join(f"{model}: time {r['time_ratio']:.2f}x, memory {r['memory_ratio']:.2f}x "
                           f"of one training step (goal: both <= 2x)"
                           for model, r in results.items()))
    return results


if __name__ == "__main__":
    main()
