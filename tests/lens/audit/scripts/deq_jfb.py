"""A deep equilibrium classifier trained with Jacobian-free backpropagation, at a tiny size,
after Fung, Heaton, Li, McKenzie, Osher and Yin, "JFB: Jacobian-Free Backpropagation for
Implicit Networks" (AAAI 2022, arXiv:2103.12803, Section 3; typeal/fixed-point-networks, whose
forward iterates the layer to its fixed point with gradients off, then applies it once more
with gradients on) and the phantom gradient of Geng, Zhang, Bai, Wang and Lin, "On Training
Implicit Models" (NeurIPS 2021, arXiv:2111.05177), whose one-step form is the same gradient.
An implicit layer ``z = tanh(W z + U x)`` (W scaled down: a contraction) and a linear head.
Two loops, one optimizer: a warm-up trains the layer applied once from zeros (an explicit
one-layer network, as Bai, Kolter and Koltun, "Deep Equilibrium Models", NeurIPS 2019,
locuslab/deq, train a shallow network before the solver is switched on); then the equilibrium
loop: ``--solver-iters`` fixed-point iterations, each iterate cut, and one differentiable step
from the fixed point, the only one the loss trains through. As published: each iterate is
detached. Data: three Gaussian clusters made in the script. ``--out PATH`` saves the weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup", type=int, default=4)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--solver-iters", type=int, default=12)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

DIM, HIDDEN, CLASSES, BATCH = 8, 16, 3, 32
centres = 1.5 * torch.randn(CLASSES, DIM)


def batch(n):
    y = torch.randint(0, CLASSES, (n,))
    return centres[y] + torch.randn(n, DIM), y


class ImplicitLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.U = nn.Linear(DIM, HIDDEN)

    def forward(self, z, x):
        return torch.tanh(0.5 * self.W(z) + self.U(x))


layer = ImplicitLayer()
head = nn.Linear(HIDDEN, CLASSES)
optimizer = torch.optim.SGD([*layer.parameters(), *head.parameters()], lr=args.lr, momentum=0.9)

for step in range(args.warmup):
    x, y = batch(BATCH)
    loss = F.cross_entropy(head(layer(torch.zeros(BATCH, HIDDEN), x)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.4f}")

for step in range(args.steps):
    x, y = batch(BATCH)
    z = torch.zeros(BATCH, HIDDEN)
    for _ in range(args.solver_iters):
        z = layer(z, x).detach()
    z = layer(z, x)
    loss = F.cross_entropy(head(z), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"layer.{k}": v for k, v in layer.state_dict().items()},
                **{f"head.{k}": v for k, v in head.state_dict().items()}}, args.out)
