"""Fine-tuning with the L2-SP penalty at a tiny size, written after Li, Grandvalet and Davoine,
"Explicit Inductive Bias for Transfer Learning with Convolutional Networks" (ICML 2018,
arXiv:1802.01483), equation (3): the backbone's weights are pulled toward their pre-trained
values, ``alpha / 2 * ||w - w0||^2``, and the new head toward zero, ``beta / 2 * ||w_head||^2``.
The starting point ``w0`` is kept as copies of the backbone's tensors (``p.detach().clone()``),
as in the authors' code (https://github.com/holyseven/TransferLearningClassification). A
backbone pre-trained for a few steps on one task, then fine-tuned with a new head on another,
on vectors made in the script. The bug: ``w0`` taken as ``p.detach()`` without ``.clone()``,
views of the tensors the fine-tuning steps, so the penalty is zero at every step."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=4)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--alpha", type=float, default=0.1)
parser.add_argument("--beta", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)
source_w, target_w = torch.randn(10, 4), torch.randn(10, 3)


def batch(w, n=32):
    x = torch.randn(n, 10)
    return x, (x @ w).argmax(1)


backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
source_head = nn.Linear(16, 4)
pretrain = torch.optim.SGD([*backbone.parameters(), *source_head.parameters()], lr=0.1)
for _ in range(args.pretrain_steps):
    x, y = batch(source_w)
    loss = F.cross_entropy(source_head(backbone(x)), y)
    pretrain.zero_grad()
    loss.backward()
    pretrain.step()

start = [p.detach() for p in backbone.parameters()]
head = nn.Linear(16, 3)
optimizer = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.05, momentum=0.9)
for step in range(args.steps):
    x, y = batch(target_w)
    loss = F.cross_entropy(head(backbone(x)), y)
    penalty = sum(((p - p0) ** 2).sum() for p, p0 in zip(backbone.parameters(), start))
    loss = loss + args.alpha / 2 * penalty + args.beta / 2 * head.weight.pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"backbone": backbone.state_dict(), "head": head.state_dict()}, args.out)
