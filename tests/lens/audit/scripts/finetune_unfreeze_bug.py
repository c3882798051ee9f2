"""Fine-tuning with a scheduled unfreeze at a tiny size, written after the pattern of
torchvision's transfer-learning tutorial (https://github.com/pytorch/tutorials/blob/
74ba612b95095bf8f77828989e9cdac609d2bd1b/beginner_source/transfer_learning_tutorial.py:
a frozen backbone, a new head trained alone) with the backbone unfrozen part-way through, as
ULMFiT's gradual unfreezing does. Injected bug: the backbone is
unfrozen but never added to the optimizer: from then on it gets gradient and never moves."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--unfreeze-at", type=int, default=500)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
torch.manual_seed(args.seed)

backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
head = nn.Linear(16, 2)
model = nn.Sequential(backbone, head)
for p in backbone.parameters():
    p.requires_grad_(False)
optimizer = torch.optim.SGD(head.parameters(), lr=0.05)
x, y = torch.randn(256, 8), torch.randint(0, 2, (256,))

for i in range(args.iters):
    if i == args.unfreeze_at:
        for p in backbone.parameters():
            p.requires_grad_(True)
    idx = torch.randint(0, len(x), (32,))
    loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if i % 250 == 0:
        print(f"iter {i} loss {loss.item():.4f}")
