"""Command-line entry point: ``toolkit`` / ``python -m toolkit``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from toolkit import compare_gradients, disable_blocks, record_blocks, stop_gradient


def demo() -> int:
    """Show the primitive: one gradient with and without a named block."""
    x = torch.tensor(3.0, requires_grad=True)

    def loss() -> torch.Tensor:
        return x * stop_gradient(x, name="demo.target")

    with record_blocks() as names:
        cmp = compare_gradients(loss, {"x": x})
    print("loss = x * stop_gradient(x, name='demo.target') at x = 3")
    print(f"blocked gradient   d/dx = {cmp.blocked['x'].item():.1f}  (the target is a constant)")
    with disable_blocks("demo.*"):
        print(f"unblocked gradient d/dx = {torch.autograd.grad(loss(), x)[0].item():.1f}  (= 2x)")
    print(f"blocks seen: {names}")
    print(cmp)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="show the stop_gradient primitive on a one-line example")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
