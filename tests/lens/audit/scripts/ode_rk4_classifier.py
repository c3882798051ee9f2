"""A neural ODE classifier integrated by a fixed-step Runge-Kutta solver and differentiated
through the solver's steps, at a tiny size, written after Chen, Rubanova, Bettencourt and
Duvenaud, "Neural Ordinary Differential Equations" (NeurIPS 2018, arXiv:1806.07366;
rtqichen/torchdiffeq, examples/odenet_mnist.py run without ``--adjoint``, where ``odeint`` is
backpropagated through the operations of the solver, torchdiffeq/_impl/fixed_grid.py's RK4
among them) and Dupont, Doucet and Teh, "Augmented Neural ODEs" (NeurIPS 2019,
arXiv:1904.01681) for the augmented state: the input, embedded in a state with extra zero
dimensions, is carried from time 0 to 1 by ``--steps`` RK4 steps of one learned vector field,
and a linear readout of the final state is classified. Every step of the integration is
differentiated, on purpose: the loss's gradient reaches the vector field through each of them.
No cut belongs anywhere. Data: two concentric rings of 2-D points made in the script. ``--out
PATH`` saves every trained tensor."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

BATCH, AUGMENT, HIDDEN = 32, 2, 16


class VectorField(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 + AUGMENT + 1, HIDDEN), nn.Tanh(),
                                 nn.Linear(HIDDEN, 2 + AUGMENT))

    def forward(self, t, state):
        return self.net(torch.cat([state, t.expand(state.shape[0], 1)], 1))


def rk4(field, state, steps):
    """The state carried from time 0 to 1 by ``steps`` classical Runge-Kutta steps."""
    dt = 1.0 / steps
    for k in range(steps):
        t = torch.tensor(k * dt)
        k1 = field(t, state)
        k2 = field(t + dt / 2, state + dt / 2 * k1)
        k3 = field(t + dt / 2, state + dt / 2 * k2)
        k4 = field(t + dt, state + dt * k3)
        state = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return state


def make_batch():
    labels = torch.randint(2, (BATCH,))
    radius = 0.5 + labels.float() + 0.1 * torch.randn(BATCH)
    angle = 6.2832 * torch.rand(BATCH)
    points = torch.stack([radius * angle.cos(), radius * angle.sin()], 1)
    return points, labels


field = VectorField()
readout = nn.Linear(2 + AUGMENT, 2)
optimizer = torch.optim.Adam([*field.parameters(), *readout.parameters()], lr=args.lr)
for it in range(args.iters):
    points, labels = make_batch()
    state = torch.cat([points, torch.zeros(BATCH, AUGMENT)], 1)
    final = rk4(field, state, args.steps)
    loss = F.cross_entropy(readout(final), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    trained = {f"field.{name}": p.detach() for name, p in field.named_parameters()}
    trained.update({f"readout.{name}": p.detach() for name, p in readout.named_parameters()})
    torch.save(trained, args.out)
