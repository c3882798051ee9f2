"""The learning-rate range test at a tiny size, written after Smith, "Cyclical Learning Rates
for Training Neural Networks" (WACV 2017, arXiv:1506.01186), section 3.3, with the range test
of davidtvs/pytorch-lr-finder (torch_lr_finder/lr_finder.py ``LRFinder.range_test``: the
learning rate raised exponentially each step, the loss smoothed, the test stopped once the
loss diverges, the model and optimizer left as they were before the test). The learner is a
plain object holding the network and its SGD optimizer; the range test trains a probe learner
made from it, picks a tenth of the learning rate of the lowest smoothed loss (the "minimum"
suggestion of fastai's ``lr_find``), and the learner is then trained at that rate. An MLP on
Gaussian clusters made in the script.
Injected bug: the probe is ``copy.copy(learner)``, whose network and optimizer are the
learner's own: the range test trains the learner's weights up to the diverging rates.
``--out PATH`` saves the learner's and the probe's weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--range-steps", type=int, default=16)
parser.add_argument("--start-lr", type=float, default=1e-3)
parser.add_argument("--end-lr", type=float, default=10.0)
parser.add_argument("--smooth", type=float, default=0.3)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 3
means = 0.6 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class Learner:
    def __init__(self, net, lr):
        self.net = net
        self.optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)

    def set_lr(self, lr):
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def step(self, x, y):
        loss = F.cross_entropy(self.net(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


learner = Learner(nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes)), 0.01)

probe = copy.copy(learner)
ratio = (args.end_lr / args.start_lr) ** (1 / (args.range_steps - 1))
best_loss, best_lr, smoothed = float("inf"), args.start_lr, None
for i in range(args.range_steps):
    lr = args.start_lr * ratio**i
    probe.set_lr(lr)
    loss = probe.step(*batch(args.batch_size))
    smoothed = loss if smoothed is None else (1 - args.smooth) * smoothed + args.smooth * loss
    if smoothed < best_loss:
        best_loss, best_lr = smoothed, lr
    print(f"range test lr {lr:.4f} loss {loss:.4f}")
    if smoothed > 5 * best_loss:
        break
chosen = best_lr / 10
print(f"chosen learning rate {chosen:.4f}")

learner.set_lr(chosen)
for step in range(args.steps):
    loss = learner.step(*batch(args.batch_size))
    print(f"step {step} loss {loss:.4f}")

if args.out:
    torch.save({"learner": learner.net.state_dict(), "probe": probe.net.state_dict()}, args.out)
