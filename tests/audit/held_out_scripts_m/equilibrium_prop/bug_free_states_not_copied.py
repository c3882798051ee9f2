"""Equilibrium propagation at a tiny size, written after Scellier and Bengio, "Equilibrium
Propagation: Bridging the Gap between Energy-Based Models and Backpropagation" (Frontiers in
Computational Neuroscience 11:24, 2017, arXiv:1602.05179), sections 2 and 3: the Hopfield-like
energy E(u) = 1/2 sum_i u_i^2 - sum_ij W_ij rho(u_i) rho(u_j) - sum_i b_i rho(u_i) with the hard
sigmoid rho, the cost C = 1/2 ||y - u_out||^2, a free phase that relaxes the states down the
gradient of E to a fixed point u^0, a nudged phase that continues from u^0 down the gradient of
F = E + beta * C to u^beta, and the weight update -(dE/dW(u^beta) - dE/dW(u^0)) / beta with the
states held fixed. With smonsays/equilibrium-propagation
(https://github.com/smonsays/equilibrium-propagation, lib/energy.py: RestrictedHopfield
.update_energy; EnergyBasedModel.u_step, which clears the gradients, backpropagates the summed
energy to the states (the same backward also writes into the weights' .grad) and moves the states
by -dt * u.grad under torch.no_grad(); u_relax; w_get_gradients, the gradient of the mean energy
to the parameters at the settled states; w_optimize, which clears the gradients before it sets
p.grad = (nudged - free) / beta and steps; lib/train.py train: the free phase, its gradients
taken, then the nudged phase started from the free fixed point). Here the contrastive update is
one backward of (E(u^beta) - E(u^0)) / beta, so the free fixed point is kept apart as a copy cut
from the states before the nudged phase moves them in place, and the weights' gradients left by
the relaxation are cleared just before that backward. A classification task, each input labelled by
the nearest of three random prototypes, made in the script. Injected bug: the free fixed point
is kept as u.detach() without .clone(), a view that shares its storage with the state, so the
nudged phase's in-place steps move the kept u^0 along with u^beta, the two energies are taken at
the same states and their difference gives the weights no gradient: the network never learns."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--free-steps", type=int, default=20)
parser.add_argument("--nudged-steps", type=int, default=8)
parser.add_argument("--dt", type=float, default=0.5)
parser.add_argument("--beta", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

sizes = [10, 24, 3]
prototypes = torch.rand(sizes[-1], sizes[0])
data_x = torch.rand(512, sizes[0])
data_y = torch.cdist(data_x, prototypes).argmin(dim=1)
data_t = F.one_hot(data_y, sizes[-1]).float()


def rho(u):
    return u.clamp(0.0, 1.0)


class Hopfield(nn.Module):
    """A layered Hopfield network: layer i's weights couple rho(u_i) and rho(u_{i+1})."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def energy(self, states):
        e = 0.5 * sum((u ** 2).sum(dim=1) for u in states[1:])
        for layer, pre, post in zip(self.layers, states, states[1:]):
            e = e - (layer(rho(pre)) * rho(post)).sum(dim=1)
        return e


def cost(states, target):
    return 0.5 * ((states[-1] - target) ** 2).sum(dim=1)


def relax(states, n_steps, beta, target):
    """Move the free states (all but the clamped input) down the gradient of E + beta * C."""
    for _ in range(n_steps):
        total = net.energy(states) + beta * cost(states, target)
        for u in states[1:]:
            u.grad = None
        total.sum().backward()
        with torch.no_grad():
            for u in states[1:]:
                u -= args.dt * u.grad


net = Hopfield()
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, len(data_x), (args.batch_size,))
    x, target = data_x[idx], data_t[idx]
    states = [x] + [torch.zeros(len(x), n, requires_grad=True) for n in sizes[1:]]
    relax(states, args.free_steps, 0.0, target)  # free phase
    free_states = [u.detach() for u in states]  # u^0, kept apart from the nudging
    relax(states, args.nudged_steps, args.beta, target)  # nudged phase, from u^0
    nudged_states = [u.detach() for u in states]
    loss = (net.energy(nudged_states) - net.energy(free_states)).mean() / args.beta
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        accuracy = (free_states[-1].argmax(1) == data_y[idx]).float().mean().item()
        print(f"step {step} contrast {loss.item():.4f} batch accuracy {accuracy:.3f}")

if args.out:
    torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, args.out)
