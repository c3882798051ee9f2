"""Online codistillation of two models at a tiny size, written after Anil, Pereyra, Passos,
Ormandi, Dahl and Hinton, "Large scale distributed neural network training through online
distillation" (ICLR 2018, arXiv:1804.03235; Algorithm 1, the peer's predictions read from a
stale copy, the distillation term only after a burn-in). The authors released no code; on one
machine the peer's prediction is cut with ``.detach()``. Injected bug: model B's prediction on
model A's batch is not cut (``peer_for_a = model_b(x_a)``), so the term that distils model A
towards model B also trains model B towards model A. The term enters after the burn-in of
three steps: the bug changes the update of iteration 3 first. The fix is that line, with
``.detach()``; a ``.detach()`` of ``peer_for_a`` where ``distill`` reads it is as right. Each
model has its own SGD optimizer, one backward of the summed losses. ``--out PATH`` saves both
models' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--burn-in", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)
shard_a, shard_b = (points[:48], labels[:48]), (points[48:], labels[48:])

model_a = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
model_b = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
optimizer_a = torch.optim.SGD(model_a.parameters(), lr=0.1, momentum=0.9)
optimizer_b = torch.optim.SGD(model_b.parameters(), lr=0.1, momentum=0.9)


def distill(logits, teacher_logits):
    return F.kl_div(F.log_softmax(logits, dim=1), F.softmax(teacher_logits, dim=1),
                    reduction="batchmean")


for step in range(args.steps):
    lo = 12 * (step % 4)
    x_a, y_a = shard_a[0][lo:lo + 12], shard_a[1][lo:lo + 12]
    x_b, y_b = shard_b[0][lo:lo + 12], shard_b[1][lo:lo + 12]
    logits_a, logits_b = model_a(x_a), model_b(x_b)
    loss_a = F.cross_entropy(logits_a, y_a)
    loss_b = F.cross_entropy(logits_b, y_b)
    if step >= args.burn_in:
        peer_for_a = model_b(x_a)
        peer_for_b = model_a(x_b).detach()
        loss_a = loss_a + distill(logits_a, peer_for_a)
        loss_b = loss_b + distill(logits_b, peer_for_b)
    optimizer_a.zero_grad()
    optimizer_b.zero_grad()
    (loss_a + loss_b).backward()
    optimizer_a.step()
    optimizer_b.step()
    print(f"step {step} loss_a {loss_a.item():.4f} loss_b {loss_b.item():.4f}")

if args.out:
    torch.save({**{f"model_a.{k}": v for k, v in model_a.state_dict().items()},
                **{f"model_b.{k}": v for k, v in model_b.state_dict().items()}}, args.out)
