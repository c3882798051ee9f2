"""Temperature-scaled validation at a tiny size, written after Guo, Pleiss, Sun and Weinberger,
"On Calibration of Modern Neural Networks" (ICML 2017, arXiv:1706.04599), section 4.2, and
gpleiss/temperature_scaling (temperature_scaling.py ``ModelWithTemperature``: the network's
logits divided by a temperature chosen on a validation set). The classifier divides its logits
by its ``temperature`` attribute (1 for training). At every validation, each temperature of a
grid is read through a shallow copy of the classifier with that temperature of its own (the
same layers, the current weights), under ``torch.no_grad()``; the best calibrated NLL drives a
plateau schedule that halves the learning rate when it stops improving. An MLP on Gaussian
clusters made in the script, one SGD optimizer.
As published: clean. The shallow copy is read at once, before any step, no optimizer holds
it and nothing writes through it: it computes what a deep copy would, and training is the same.
``--out PATH`` saves the classifier's weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--validate-every", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 4
means = 0.8 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
        self.temperature = 1.0

    def forward(self, x):
        return self.body(x) / self.temperature


net = Classifier()
optimizer = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
x_val, y_val = batch(256)
grid = [0.5, 0.75, 1.0, 1.5, 2.0, 3.0]
best = float("inf")

for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % args.validate_every == 0:
        nlls = []
        for t in grid:
            calibrated = copy.copy(net)
            calibrated.temperature = t
            with torch.no_grad():
                nlls.append(F.cross_entropy(calibrated(x_val), y_val).item())
        nll = min(nlls)
        if nll > best:
            for group in optimizer.param_groups:
                group["lr"] *= 0.5
        best = min(best, nll)
        print(f"step {step} loss {loss.item():.4f} calibrated NLL {nll:.4f} at "
              f"T={grid[nlls.index(nll)]} lr {optimizer.param_groups[0]['lr']:.4f}")

if args.out:
    torch.save({"net": net.state_dict()}, args.out)
