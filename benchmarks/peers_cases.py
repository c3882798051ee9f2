"""The corpus as :mod:`audit_peers` and :mod:`peers_ddp` run it: each case built fresh from
its seed, one training iteration as every peer runs it (each loss backpropagated alone, each
optimizer stepped with the sum of its losses' gradients), and one table cell per tool."""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "lens" / "audit" / "real_code"
DDP_ITERATIONS, ANOMALY_ITERATIONS = 3, 2
HAND_LR = 0.1  # a module "optimizer" (trained by hand) is stepped as p -= HAND_LR * grad
CELL_CHARS = 200


# --- the corpus ---------------------------------------------------------------------------------


def corpus() -> dict[str, Callable[[int], Any]]:
    """``name -> builder(seed)`` of every case ``test_real_code.CASES`` holds now."""
    if str(CORPUS) not in sys.path:
        sys.path.insert(0, str(CORPUS))
    from test_real_code import CASES

    return dict(CASES)


class CaseUnavailable(RuntimeError):
    """A case's builder failed or skipped (the corpus extra, ``nflows``, not installed)."""


def build(name: str, seed: int) -> Any:
    """A fresh copy of the case ``name`` (its builder's deprecation warnings silenced)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return corpus()[name](seed)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # pytest.skip (a missing extra) is a BaseException
        raise CaseUnavailable(f"cannot build {name}: {one_line(str(err), 120)}") from err


@dataclass
class Cell:
    """What one tool said about one case: the table's text, whether it flagged anything, the
    time it took and, for DDP, the parameters it named."""

    text: str
    flagged: bool
    seconds: float
    names: list[str] = field(default_factory=list)


def one_line(text: str, limit: int = CELL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis where it was cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


# --- one training iteration (DDP and anomaly mode) ----------------------------------------------


def stepped(optimizer: Any) -> list[torch.Tensor]:
    """The tensors an optimizer steps; a module trained by hand steps its parameters."""
    if isinstance(optimizer, nn.Module):
        return list(optimizer.parameters())
    return [p for group in optimizer.param_groups for p in group["params"]]


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Tag an exception raised inside with ``phase`` (where in training it was raised), unless
    an inner phase already did."""
    try:
        yield
    except Exception as err:
        if not hasattr(err, "phase"):
            err.phase = name
        raise


def train(case: Any, iterations: int) -> None:
    """``iterations`` training iterations of ``case`` (see the module's docstring); raises what
    the step, a backward or an optimizer raises, tagged with its :func:`phase`."""
    every = {id(t): t for m in case.modules.values() for t in m.parameters()}
    every.update({id(t): t for t in case.tensors.values()})

    def clear() -> None:
        for t in every.values():
            t.grad = None

    for it in range(1, iterations + 1):
        with phase(f"iteration {it}, step()"):
            out = case.step()
        losses = dict(out) if isinstance(out, dict) else {"loss": out}
        paired = case.optimizers if isinstance(case.optimizers, dict) else {
            name: case.optimizers for name in losses}
        optimizers = {id(paired[name]): (name, paired[name]) for name in losses}
        for _, opt in optimizers.values():
            every.update({id(p): p for p in stepped(opt)})
        kept: dict[int, dict[int, torch.Tensor]] = {k: {} for k in optimizers}
        for i, (name, loss) in enumerate(losses.items()):
            clear()
            if loss.requires_grad:
                with phase(f"iteration {it}, backward of {name!r}"):
                    loss.backward(retain_graph=i < len(losses) - 1)
            mine = kept[id(paired[name])]
            for p in stepped(paired[name]):
                if p.grad is not None:
                    mine[id(p)] = p.grad.clone() + mine[id(p)] if id(p) in mine else p.grad.clone()
        for key, (name, opt) in optimizers.items():
            clear()
            for p in stepped(opt):
                p.grad = kept[key].get(id(p))
            with phase(f"iteration {it}, optimizer of {name!r}"), torch.no_grad():
                if isinstance(opt, nn.Module):
                    for p in opt.parameters():
                        if p.grad is not None:
                            p.add_(p.grad, alpha=-HAND_LR)
                else:
                    opt.step()
        clear()


def error_text(err: BaseException) -> str:
    """``in PHASE: Type: message`` (the message's first sentence; DDP's parameter list kept)."""
    message = str(err)
    first = re.split(r"(?<=[.!?])\s|\s\(|\n", message.strip(), maxsplit=1)[0]
    where = getattr(err, "phase", None)
    return f"{'in ' + where + ': ' if where else ''}{type(err).__name__}: {first}"


def full_error(err: BaseException) -> str:
    where = getattr(err, "phase", None)
    return f"{'in ' + where + ': ' if where else ''}{type(err).__name__}: {err}"


