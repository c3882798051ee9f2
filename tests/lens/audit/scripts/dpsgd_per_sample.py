"""DP-SGD at a tiny size, written after Algorithm 1 of Abadi et al., "Deep Learning with
Differential Privacy" (CCS 2016, arXiv:1607.00133) and the per-microbatch gradients of
tensorflow/privacy's DP optimizers (https://github.com/tensorflow/privacy): each example's
gradient computed by its own ``backward()``, read from ``.grad``, clipped to norm ``C`` and added
to a sum, the ``.grad`` cleared for the next example; then Gaussian noise added, the mean written
into ``.grad`` and one ``optimizer.step()``. A logistic-regression MLP on points of two
Gaussian blobs, made in the script. Clean: every cleared gradient was read before it was cleared
(must not be flagged as a lost gradient)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--lot-size", type=int, default=6)
parser.add_argument("--clip", type=float, default=1.0)
parser.add_argument("--noise-multiplier", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

points = torch.cat([torch.randn(32, 2) + 1.5, torch.randn(32, 2) - 1.5])
classes = torch.cat([torch.zeros(32, dtype=torch.long), torch.ones(32, dtype=torch.long)])
model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
params = list(model.parameters())
optimizer = torch.optim.SGD(params, lr=0.5)
for step in range(args.steps):
    lot = torch.randperm(len(points))[:args.lot_size]
    summed = [torch.zeros_like(p) for p in params]
    for i in lot:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(points[i:i + 1]), classes[i:i + 1])
        loss.backward()
        norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in params))
        factor = min(1.0, args.clip / (norm.item() + 1e-6))
        for total, p in zip(summed, params):
            total.add_(p.grad, alpha=factor)
    for total, p in zip(summed, params):
        noise = args.noise_multiplier * args.clip * torch.randn_like(total)
        p.grad = (total + noise) / len(lot)
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
