"""R-Drop at a tiny size, written after Liang, Wu, Li, Wang, Meng, Qin, Chen, Zhang and Liu,
"R-Drop: Regularized Dropout for Neural Networks" (NeurIPS 2021, arXiv:2106.14448) and
dropreg/R-Drop (README, ``compute_kl_loss``: the symmetric KL of the two dropout passes,
``F.kl_div(F.log_softmax(p), F.softmax(q))`` plus ``F.kl_div(F.log_softmax(q),
F.softmax(p))``, halved, with no cut; the training step adds the mean cross-entropy of both
passes). One network with dropout, the two passes each pulled towards the other on purpose.
Adam. Points made in the script. Clean. ``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
alpha = 1.0


def compute_kl_loss(p, q):
    p_loss = F.kl_div(F.log_softmax(p, dim=-1), F.softmax(q, dim=-1), reduction="none")
    q_loss = F.kl_div(F.log_softmax(q, dim=-1), F.softmax(p, dim=-1), reduction="none")
    return (p_loss.sum() + q_loss.sum()) / 2


for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    logits, logits2 = model(x), model(x)
    ce = 0.5 * (F.cross_entropy(logits, y) + F.cross_entropy(logits2, y))
    kl = compute_kl_loss(logits, logits2) / len(x)
    loss = ce + alpha * kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} kl {kl.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
