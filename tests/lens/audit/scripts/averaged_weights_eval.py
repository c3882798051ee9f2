"""Weight averaging kept for evaluation only, at a tiny size, written after Polyak & Juditsky,
"Acceleration of stochastic approximation by averaging" (SIAM J. Control Optim. 30(4), 1992)
and the use of ``torch.optim.swa_utils.AveragedModel`` that PyTorch's documentation shows
(https://pytorch.org/docs/stable/optim.html#weight-averaging-swa-and-ema): a classifier of
three Gaussian blobs trained by cross-entropy, the running average of its weights updated
after every step and read only after training; the training accuracy of the online network is
logged under ``torch.no_grad()`` every step (a number no loss reads). As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=5)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
torch.manual_seed(args.seed)

centers = torch.tensor([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
labels = torch.arange(3).repeat_interleave(64)
points = centers[labels] + 0.7 * torch.randn(len(labels), 2)

model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))
averaged = AveragedModel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

for step in range(args.steps):
    idx = torch.randint(0, len(labels), (32,))
    loss = F.cross_entropy(model(points[idx]), labels[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    averaged.update_parameters(model)
    with torch.no_grad():
        accuracy = (model(points).argmax(1) == labels).float().mean()
    print(f"step {step} loss {loss.item():.4f} train accuracy {accuracy.item():.3f}")

with torch.no_grad():
    final = (averaged(points).argmax(1) == labels).float().mean()
print(f"averaged weights accuracy {final.item():.3f}")
