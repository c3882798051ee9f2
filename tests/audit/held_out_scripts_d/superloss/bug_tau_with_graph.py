"""SuperLoss at a tiny size, written after Castells, Weinzaepfel and Revaud, "SuperLoss: A Generic
Loss for Robust Curriculum Learning" (NeurIPS 2020), Section 3: each sample's task loss ``l_i`` is
replaced by ``(l_i - tau) * sigma_i + lambda * (log sigma_i)^2`` with the confidence ``sigma_i``
at its closed-form optimum ``exp(-W(max(-2/e, (l_i - tau) / lambda) / 2))`` (W the Lambert W
function, computed from the loss as a constant), and the threshold ``tau`` the running average of
the loss with exponential smoothing, kept as a statistic outside the graph. A softmax-regression
classifier on vectors made in the script, with a quarter of the labels flipped. Injected bug: the
threshold tau is updated in update_tau from the per-sample losses with their graph (``loss`` for
``loss.detach()``), so tau keeps every earlier minibatch's graph; ``backward(retain_graph=True)``
lets the run go on, and from the second step the SuperLoss trains the classifier through the
earlier minibatches' losses too."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lam", type=float, default=0.25)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 4
means = 1.2 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    x = means[y] + torch.randn(n, dim)
    flip = torch.rand(n) < 0.25
    return x, torch.where(flip, torch.randint(0, classes, (n,)), y)


def lambert_w(y, iters=30):
    w = torch.log1p(y)
    for _ in range(iters):
        ew = w.exp()
        w = (w - (w * ew - y) / (ew * (w + 1))).clamp(min=-1 + 1e-6)
    return w


class SuperLoss(nn.Module):
    def __init__(self, num_classes, lam, momentum):
        super().__init__()
        self.lam, self.momentum = lam, momentum
        self.tau = math.log(num_classes)

    def update_tau(self, loss):
        self.tau = self.momentum * self.tau + (1 - self.momentum) * loss.mean()

    def forward(self, logits, targets):
        loss = F.cross_entropy(logits, targets, reduction="none")
        with torch.no_grad():
            beta = (loss - self.tau) / self.lam
            sigma = torch.exp(-lambert_w(0.5 * beta.clamp(min=-2 / math.e)))
        out = (loss - self.tau) * sigma + self.lam * sigma.log().pow(2)
        self.update_tau(loss)
        return out.mean()


model = nn.Linear(dim, classes)
criterion = SuperLoss(classes, args.lam, args.momentum)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} superloss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
