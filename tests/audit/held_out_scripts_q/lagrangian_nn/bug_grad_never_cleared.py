"""Lagrangian neural network (LNN) on a double pendulum at a tiny size, written after Cranmer,
Greydanus, Hoyer, Battaglia, Spergel and Ho, "Lagrangian Neural Networks" (ICLR 2020 workshop on
integration of deep neural models and differential equations, arXiv:2003.04630): a network
outputs a scalar Lagrangian L(q, q_dot), and the accelerations are those the Euler-Lagrange
equations give, q_ddot = (d2L/dq_dot2)^-1 (dL/dq - d2L/(dq_dot dq) q_dot), so that the loss on
the accelerations is backpropagated through first and second derivatives of the network, which
all need create_graph=True.
With MilesCranmer/lagrangian_nns (https://github.com/MilesCranmer/lagrangian_nns, lnn.py:
lagrangian_eom and raw_lagrangian_eom take jax.hessian of the Lagrangian in q_dot, invert it with
jnp.linalg.pinv, and multiply it with jax.grad in q less jax.jacobian(jax.jacobian(L, 1), 0)
applied to q_dot, every piece differentiable in the parameters; experiment_dblpend/train.py:
gln_loss vmaps that over the batch and takes the mean squared error against the true
derivatives, and update_derivative applies jax.grad of the loss with the Adam of
jax.experimental.optimizers, a pure function that starts every step from a fresh gradient;
experiment_dblpend/physics.py: analytical_fn, the double pendulum's accelerations with unit
masses and lengths and g = 9.8). Here PyTorch's torch.autograd.grad stands for jax.grad, the
two rows of the Hessian that hold d/dq_dot are taken one by one, and the optimizer's gradients
are cleared before each backward, as JAX's fresh gradients are. The data: random double
pendulum states and their analytical accelerations, made in the script.
Bug: the optimizer's gradients are never cleared, an easy slip when porting from JAX, whose
jax.grad in experiment_dblpend/train.py update_derivative returns a fresh gradient at every step
(the PyTorch equivalent is an optimizer.zero_grad() before each backward): from the second step
on, loss.backward() adds the new gradient to all the earlier ones left in .grad, and Adam steps
the Lagrangian along the running sum of every past batch's gradient instead of the current one."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained Lagrangian")
args = parser.parse_args()
torch.manual_seed(args.seed)


def double_pendulum_accel(state, g=9.8):
    """Analytical accelerations of a double pendulum, unit masses and lengths."""
    t1, t2, w1, w2 = state.unbind(-1)
    a1 = 0.5 * torch.cos(t1 - t2)
    a2 = torch.cos(t1 - t2)
    f1 = -0.5 * w2 ** 2 * torch.sin(t1 - t2) - g * torch.sin(t1)
    f2 = w1 ** 2 * torch.sin(t1 - t2) - g * torch.sin(t2)
    g1 = (f1 - a1 * f2) / (1 - a1 * a2)
    g2 = (f2 - a2 * f1) / (1 - a1 * a2)
    return torch.stack([g1, g2], -1)


# data: random states (angles and angular velocities) and their true accelerations
n_data = 1024
states = torch.cat([(torch.rand(n_data, 2) * 2 - 1) * torch.pi, torch.randn(n_data, 2)], 1)
accels = double_pendulum_accel(states)


class Lagrangian(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, hidden), nn.Softplus(), nn.Linear(hidden, hidden),
                                 nn.Softplus(), nn.Linear(hidden, 1))

    def forward(self, state):
        return self.net(state).squeeze(-1)


def lagrangian_accel(lagrangian, state):
    """Euler-Lagrange accelerations of a learnt Lagrangian, differentiable in its parameters."""
    x = state.clone().requires_grad_(True)
    q_dot = x[:, 2:]
    grad_l = torch.autograd.grad(lagrangian(x).sum(), x, create_graph=True)[0]
    # rows of the Hessian for d/dq_dot: [d2L/dq_dot dq, d2L/dq_dot2]
    rows = [torch.autograd.grad(grad_l[:, 2 + i].sum(), x, create_graph=True)[0] for i in range(2)]
    hess = torch.stack(rows, 1)  # B x 2 x 4
    mixed, mass = hess[:, :, :2], hess[:, :, 2:]
    force = grad_l[:, :2] - (mixed @ q_dot.unsqueeze(-1)).squeeze(-1)
    mass_inv = torch.linalg.pinv(mass)
    return (mass_inv @ force.unsqueeze(-1)).squeeze(-1)


lagrangian = Lagrangian()
optimizer = torch.optim.Adam(lagrangian.parameters(), lr=args.lr)

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    pred = lagrangian_accel(lagrangian, states[idx])
    loss = (pred - accels[idx]).pow(2).mean()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"lagrangian.{k}": v.detach().clone() for k, v in lagrangian.state_dict().items()},
               args.out)
