"""Hamiltonian neural networks at a tiny size, written after Greydanus, Dzamba and Yosinski,
"Hamiltonian Neural Networks" (NeurIPS 2019, arXiv:1906.01563), section 3 (a network H_theta(q, p)
whose symplectic gradient (dH/dp, -dH/dq) is the time derivative of the state, trained by the L2
loss against the observed time derivatives) and the ideal mass-spring task of section 4, with
greydanus/hamiltonian-nn (https://github.com/greydanus/hamiltonian-nn, hnn.py HNN: forward,
permutation_tensor, which builds the fixed canonical matrix M = [[0, 1], [-1, 0]], and
time_derivative, whose solenoidal field is torch.autograd.grad(F2.sum(), x, create_graph=True)[0]
@ M.t(), so that the loss on the derivatives reaches the parameters; nn_models.py MLP, a tanh MLP
with orthogonal weights; experiment-spring/data.py, H = q^2 + p^2, noisy states and the true
derivatives (2p, -2q) at the clean ones; experiment-spring/train.py train, a full-batch Adam with
weight_decay=1e-4 over model.parameters(), loss.backward(), optim.step() and optim.zero_grad(),
then the test loss of the same time derivative on held-out states). The spring's trajectories are
written in closed form in the script. As published: clean."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--hidden-dim", type=int, default=64)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--samples", type=int, default=24)
parser.add_argument("--noise-std", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)


def get_trajectories(samples, timescale=5, t_end=3.0):
    """Orbits of dq/dt = 2p, dp/dt = -2q (H = q^2 + p^2) of random radius and phase."""
    t = torch.linspace(0, t_end, int(timescale * t_end))
    radius = 0.1 + 0.9 * torch.rand(samples, 1)
    phase = 2 * math.pi * torch.rand(samples, 1)
    q, p = radius * torch.cos(phase - 2 * t), radius * torch.sin(phase - 2 * t)
    dq, dp = 2 * p, -2 * q
    q = q + args.noise_std * torch.randn_like(q)
    p = p + args.noise_std * torch.randn_like(p)
    x = torch.stack([q.flatten(), p.flatten()], dim=1)
    return x, torch.stack([dq.flatten(), dp.flatten()], dim=1)


def permutation_tensor(n):
    eye = torch.eye(n)
    return torch.cat([eye[n // 2:], -eye[:n // 2]])


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.linear1 = nn.Linear(input_dim, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, output_dim, bias=False)
        for layer in (self.linear1, self.linear2, self.linear3):
            nn.init.orthogonal_(layer.weight)

    def forward(self, x):
        h = self.linear1(x).tanh()
        h = self.linear2(h).tanh()
        return self.linear3(h)


class HNN(nn.Module):
    def __init__(self, input_dim, differentiable_model):
        super().__init__()
        self.differentiable_model = differentiable_model
        self.register_buffer("M", permutation_tensor(input_dim))

    def forward(self, x):
        return self.differentiable_model(x)

    def time_derivative(self, x):
        """The solenoidal field M dH/dx of the learnt Hamiltonian."""
        x = x.detach().requires_grad_(True)
        F2 = self.forward(x)
        dF2 = torch.autograd.grad(F2.sum(), x, create_graph=True)[0]
        return dF2 @ self.M.t()


def L2_loss(u, v):
    return (u - v).pow(2).mean()


data_x, data_dx = get_trajectories(args.samples)
split = len(data_x) // 2
x, dxdt = data_x[:split], data_dx[:split]
test_x, test_dxdt = data_x[split:], data_dx[split:]

model = HNN(2, differentiable_model=MLP(2, args.hidden_dim, 1))
optim = torch.optim.Adam(model.parameters(), args.lr, weight_decay=1e-4)
for step in range(args.steps):
    dxdt_hat = model.time_derivative(x)
    loss = L2_loss(dxdt, dxdt_hat)
    loss.backward()
    optim.step()
    optim.zero_grad()
    test_dxdt_hat = model.time_derivative(test_x)
    test_loss = L2_loss(test_dxdt, test_dxdt_hat)
    print(f"step {step} train_loss {loss.item():.4e} test_loss {test_loss.item():.4e}")

if args.out:
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, args.out)
