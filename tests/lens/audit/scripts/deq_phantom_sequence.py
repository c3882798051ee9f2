"""A deep equilibrium sequence model trained with the phantom gradient, at a tiny size, written
after Bai, Kolter and Koltun, "Deep Equilibrium Models" (NeurIPS 2019, arXiv:1909.01377;
locuslab/deq) for the weight-tied causal sequence layer whose fixed point is the output, and
after Geng, Zhang, Bai, Wang and Lin, "On Training Implicit Models" (NeurIPS 2021,
arXiv:2111.05177) and Bai, Geng, Koltun and Kolter, "Deep Equilibrium Optical Flow Estimation"
(CVPR 2022, arXiv:2204.08442; locuslab/deq-flow, code.v.2.0/core/deq/deq_class.py,
DEQBase._solve_fixed_point, which solves under ``torch.no_grad()``, and core/deq/grad.py,
backward_factory's ``phantom_grad``) for the training: the fixed point is found by a solver
that hands on its iterate without a graph, then a few damped applications of the same layer,
``z = (1 - tau) * z + tau * f(z, x)``, are differentiated. Here the solver is a function of the
script, ``solve``, running Picard iterations from zero. As published, it returns the iterate
detached (``return z.detach()``): the loss backpropagates through the phantom steps alone. The
bug twin returns ``z``, so the loss also backpropagates through every solver iteration: the fix
is that line; detaching the solver's iterate at each of its iterations, or where the training
loop binds what ``solve`` returns, is exactly as right. Data: random sequences made in the
script, the target an exponential moving average of the input. ``--out PATH`` saves every
trained tensor. This file: the published script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--solver-iters", type=int, default=12)
parser.add_argument("--phantom-steps", type=int, default=2)
parser.add_argument("--tau", type=float, default=0.6)
parser.add_argument("--lr", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

BATCH, LENGTH, HIDDEN = 8, 20, 12


class EquilibriumLayer(nn.Module):
    """f(z, x) = tanh(causal_conv(z) + inject(x)), weight-tied across depth."""

    def __init__(self):
        super().__init__()
        self.mix = nn.Conv1d(HIDDEN, HIDDEN, 3)
        self.inject = nn.Conv1d(1, HIDDEN, 1)
        self.mix.weight.data.mul_(0.5)

    def forward(self, z, x):
        return torch.tanh(self.mix(F.pad(z, (2, 0))) + self.inject(x))


def make_batch():
    x = torch.randn(BATCH, 1, LENGTH)
    y = torch.zeros_like(x)
    for t in range(LENGTH):
        y[..., t] = 0.7 * y[..., t - 1] + 0.3 * x[..., t] if t else 0.3 * x[..., t]
    return x, y


def solve(layer, x, iters):
    """The layer's fixed point for the input ``x``, by Picard iterations from zero."""
    z = torch.zeros(x.shape[0], HIDDEN, x.shape[2])
    for _ in range(iters):
        z = layer(z, x)
    return z.detach()


layer = EquilibriumLayer()
readout = nn.Conv1d(HIDDEN, 1, 1)
optimizer = torch.optim.Adam([*layer.parameters(), *readout.parameters()], lr=args.lr)
for it in range(args.iters):
    x, y = make_batch()
    z = solve(layer, x, args.solver_iters)
    for _ in range(args.phantom_steps):
        z = (1 - args.tau) * z + args.tau * layer(z, x)
    loss = F.mse_loss(readout(z), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    trained = {f"layer.{name}": p.detach() for name, p in layer.named_parameters()}
    trained.update({f"readout.{name}": p.detach() for name, p in readout.named_parameters()})
    torch.save(trained, args.out)
