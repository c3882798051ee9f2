"""Data hyper-cleaning by a truncated hypergradient, at a tiny size, after Shaban, Cheng,
Hatch and Boots, "Truncated Back-propagation for Bilevel Optimization" (AISTATS 2019,
arXiv:1810.10667, Algorithm 1, K-RMD, and the data hyper-cleaning of Section 5), the task of
Franceschi, Donini, Frasconi and Pontil, "Forward and Reverse Gradient-Based Hyperparameter
Optimization" (ICML 2017, arXiv:1703.01785; lucfra/FAR-HO). Each training example has a learned
weight (a sigmoid of its logit); each hyper-iteration trains a linear classifier from zeros by
``horizon`` steps of gradient descent on the weighted loss of a training set with corrupted
labels, and the weights are stepped by the gradient of the clean validation loss through the
LAST ``--truncate`` inner steps alone: the earlier ones run forward only, their iterate cut
where they hand it on. The horizon is ``--truncate`` (every step reversed, nothing to cut) for
the first ``--warmup`` hyper-iterations, then ``--horizon``. As published: the iterate of each
step before the last K is detached. Data: three Gaussian clusters made in the script, a third
of the training labels replaced at random. ``--out PATH`` saves the examples' weight logits."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--horizon", type=int, default=12)
parser.add_argument("--truncate", type=int, default=3)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weight logits")
args = parser.parse_args()
torch.manual_seed(args.seed)

DIM, CLASSES, TRAIN, VALID = 5, 3, 48, 48
centres = 1.5 * torch.randn(CLASSES, DIM)


def sample(n):
    y = torch.randint(0, CLASSES, (n,))
    return centres[y] + torch.randn(n, DIM), y


x_train, y_train = sample(TRAIN)
corrupted = torch.rand(TRAIN) < 1 / 3
y_train = torch.where(corrupted, torch.randint(0, CLASSES, (TRAIN,)), y_train)
x_valid, y_valid = sample(VALID)


class Cleaner(nn.Module):
    def __init__(self):
        super().__init__()
        self.example_logits = nn.Parameter(torch.zeros(TRAIN))

    def forward(self, w):
        losses = F.cross_entropy(x_train @ w, y_train, reduction="none")
        return (torch.sigmoid(self.example_logits) * losses).mean()


def inner_step(w, cleaner):
    grad, = torch.autograd.grad(cleaner(w), w, create_graph=True)
    return w - args.alpha * grad


cleaner = Cleaner()
optimizer = torch.optim.SGD(cleaner.parameters(), lr=args.lr)

for step in range(args.steps):
    horizon = args.truncate if step < args.warmup else args.horizon
    w = torch.zeros(DIM, CLASSES, requires_grad=True)
    for _ in range(horizon - args.truncate):
        w = inner_step(w, cleaner).detach().requires_grad_()
    for _ in range(args.truncate):
        w = inner_step(w, cleaner)
    loss = F.cross_entropy(x_valid @ w, y_valid)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} validation loss {loss.item():.4f}")

if args.out:
    torch.save({f"cleaner.{k}": v for k, v in cleaner.state_dict().items()}, args.out)
