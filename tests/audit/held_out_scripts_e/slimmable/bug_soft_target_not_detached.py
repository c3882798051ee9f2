"""A universally slimmable network at a tiny size, written after Yu and Huang, "Universally
Slimmable Networks and Improved Training Techniques" (ICCV 2019, arXiv:1903.05134), Algorithm 1 (the
sandwich rule and inplace distillation), with the training step of JiahuiYu/slimmable_networks
(https://github.com/JiahuiYu/slimmable_networks, train.py and utils/loss_ops.py): one set of weights
runs at any width (each layer uses the first channels of its weight); every iteration clears the
gradients once, then runs the largest width on the labels, the smallest and two random widths on the
largest width's predicted distribution cut from its graph (``soft_target.detach()``), accumulates
the gradients of the four backward passes, and steps once. Two phases, the largest network being
trained first, as in the progressive shrinking of Cai, Gan, Wang, Zhang and Han, "Once-for-All"
(ICLR 2020, arXiv:1908.09791): the full-width network alone, then the sandwich rule. An MLP
classifier on vectors made in the script. Injected bug: the smaller widths read the largest width's
predicted distribution without .detach(), so their distillation losses also train the weights
through the largest width's pass; ``backward(retain_graph=True)`` lets the run go on past the second
backward through that pass."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=8)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--min-width", type=float, default=0.25)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, classes = 12, 32, 4
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class USLinear(nn.Linear):
    def __init__(self, in_features, out_features, slim_in=True, slim_out=True):
        super().__init__(in_features, out_features)
        self.slim_in, self.slim_out = slim_in, slim_out
        self.width_mult = 1.0

    def forward(self, x):
        out_features = self.out_features
        if self.slim_out:
            out_features = max(1, round(self.width_mult * self.out_features))
        weight = self.weight[:out_features, :x.shape[-1]]
        return F.linear(x, weight, self.bias[:out_features])


def set_width(model, width_mult):
    for module in model.modules():
        if isinstance(module, USLinear):
            module.width_mult = width_mult


def soft_cross_entropy(output, target):
    return -(target * F.log_softmax(output, dim=1)).sum(1).mean()


model = nn.Sequential(USLinear(dim, hidden, slim_in=False), nn.ReLU(), USLinear(hidden, hidden),
                      nn.ReLU(), USLinear(hidden, classes, slim_out=False))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

# phase 1: the largest network alone
for step in range(args.pretrain_steps):
    x, y = batch(args.batch_size)
    set_width(model, 1.0)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: the sandwich rule with inplace distillation
for step in range(args.steps):
    x, y = batch(args.batch_size)
    widths = [1.0, args.min_width] + [float(args.min_width + (1 - args.min_width) * torch.rand(()))
                                      for _ in range(2)]
    optimizer.zero_grad()
    for width_mult in widths:
        set_width(model, width_mult)
        output = model(x)
        if width_mult == 1.0:
            loss = F.cross_entropy(output, y)
            soft_target = F.softmax(output, dim=1)
        else:
            loss = soft_cross_entropy(output, soft_target)
        loss.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} widths {[round(w, 2) for w in widths]} last loss {loss.item():.4f}")

if args.out:
    set_width(model, 1.0)
    torch.save(model.state_dict(), args.out)
