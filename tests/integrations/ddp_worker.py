"""One process of the two-process DDP test (``test_ddp.py`` starts two of these).

``python ddp_worker.py RANK WORLD RENDEZVOUS_FILE OUT_JSON``: joins a ``gloo`` process group,
explains the model's unused parameters *before* DDP, then wraps the model in
``DistributedDataParallel`` without ``find_unused_parameters`` and trains until DDP fails,
keeping its message; then applies the fix the explanation proposes (freeze what gets no
gradient) and trains three iterations under DDP again. Writes what it saw as JSON.

The model puts in one place the four ways a parameter gets no gradient that DDP reports:

- (a) a branch defined and never called (the ``token_predict_head`` of vita-epfl/UniTraj#59's
  SMART encoder, "LightningModule has unused parameters");
- (b) a head whose output ``forward`` returns and the loss leaves out (DDP's own advice:
  "making sure all `forward` function outputs participate in calculating loss");
- (c) a ``.detach()`` that cuts a sub-network off the loss (the generator behind
  ``gen_img.detach()`` in Lightning-AI/pytorch-lightning#20034, where the detach is right
  and DDP still fails);
- (d) a frozen block (``requires_grad_(False)`` before DDP, which Lightning-AI/
  pytorch-lightning#18457 gives as the way to keep a layer untrained under DDP): DDP
  leaves it out and never reports it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from toolkit import explain_unused_parameters


class Detector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
        self.token_predict_head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(),  # (a)
                                                nn.Linear(16, 8))
        self.aux_head = nn.Linear(16, 3)
        self.teacher = nn.Sequential(nn.Linear(16, 16), nn.Tanh())
        self.frozen_proj = nn.Linear(16, 16).requires_grad_(False)  # (d)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.backbone(x)
        target = self.teacher(h).detach()  # (c)
        aux = self.aux_head(h)  # (b)
        return self.head(self.frozen_proj(h) + target), aux


def loss_fn(out: tuple[torch.Tensor, torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    pred, _aux = out
    return F.mse_loss(pred.squeeze(1), y)


def train(ddp: DistributedDataParallel, x: torch.Tensor, y: torch.Tensor, steps: int
          ) -> str | None:
    """Forward and backward ``steps`` times; DDP's error message, if it raises one."""
    for _ in range(steps):
        try:
            loss_fn(ddp(x), y).backward()
        except RuntimeError as err:
            return str(err)
    return None


def main(rank: int, world: int, rendezvous: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(8, 6, generator=g), torch.randn(8, generator=g)

    torch.manual_seed(0)
    model = Detector()
    explained = explain_unused_parameters(model, lambda: loss_fn(model(x), y))
    error = train(DistributedDataParallel(model), x, y, steps=2)

    torch.manual_seed(0)
    fixed = Detector()
    for name, p in fixed.named_parameters():
        if name in explained.names:
            p.requires_grad_(False)  # the fix the explanation proposes for each of them
    after = explain_unused_parameters(fixed, lambda: loss_fn(fixed(x), y))
    ddp = DistributedDataParallel(fixed)
    # given the wrapper, it explains its module, and refuses a step that calls the wrapper
    wrapped = explain_unused_parameters(ddp, lambda: loss_fn(fixed(x), y))
    try:
        explain_unused_parameters(ddp, lambda: loss_fn(ddp(x), y))
        refused = None
    except ValueError as err:
        refused = str(err)
    error_after = train(ddp, x, y, steps=3)
    dist.destroy_process_group()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"rank": rank, "error": error, "error_after": error_after,
                   "explained": [[p.name, p.kind, p.line] for p in explained.unused],
                   "frozen": list(explained.frozen), "text": str(explained),
                   "after_ok": after.ok and wrapped.ok, "refused": refused,
                   "n_parameters": explained.n_parameters}, f)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
    # Out without the interpreter's finalisation: the DDP that failed on purpose can leave
    # gloo work whose tensors are freed there, from gloo's threads, which aborts the process
    # ("terminate called without an active exception", pytorch/pytorch#179291) after it
    # has written everything, once in a while on a loaded machine.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
