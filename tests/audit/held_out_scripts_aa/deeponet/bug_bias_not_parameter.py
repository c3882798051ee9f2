"""DeepONet learning the antiderivative operator, then refined as a physics-informed DeepONet.

Papers: Lu Lu, Pengzhan Jin, Guofei Pang, Zhongqiang Zhang and George Em Karniadakis,
"Learning nonlinear operators via DeepONet based on the universal approximation theorem of
operators", Nature Machine Intelligence 3, 2021, arXiv:1910.03193; Sifan Wang, Hanwen Wang and
Paris Perdikaris, "Learning the solution operator of parametric partial differential equations
with physics-informed DeepONets", Science Advances 7(40), 2021, arXiv:2103.10974.
Reference implementations: lululxvi/deepxde -- deepxde/nn/pytorch/deeponet.py (DeepONet: a
branch FNN on the m sensor values of u, a trunk FNN on the query point y, the output the dot
product of the two p-dimensional features plus a learned scalar bias b, a torch Parameter) and
examples/operator/antiderivative_unaligned.py (u drawn from a Gaussian random field, the
target s(y) = int_0^y u(x) dx, training on (u, y, s) triples with Adam);
PredictiveIntelligenceLab/Physics-informed-DeepONets, Antiderivative/PI_DeepONet_antideriv.ipynb
(loss_ics on s(u)(0) = 0 and loss_res on ds/dy - u(y) = 0, the derivative of the operator
output taken with respect to the trunk input by automatic differentiation, Adam).

Input functions u are drawn from a zero-mean Gaussian random field (squared-exponential kernel,
length scale 0.2) on m = 32 sensors in [0, 1]; s is their cumulative trapezoid integral on the
same grid. The branch net (32-40-40, tanh, linear last layer) and the trunk net (1-40-40, tanh
on every layer) are combined as sum_k b_k(u) t_k(y) + b. Two phases. Phase 1 (data-driven
DeepONet): 40 Adam steps on mini-batches of 256 random (u_i, y_j, s_i(y_j)) triples with the
mean squared error. Phase 2 (physics-informed DeepONet on a new set of input functions without
labels): a fresh Adam with a smaller step size runs 30 steps on loss_res + loss_ics, where
ds/dy is taken with torch.autograd.grad(..., create_graph=True) with respect to the trunk
input, so that the residual loss back-propagates into the branch, the trunk and b by a double
backward. Every module and the bias b are in both optimizers.
Bug: the scalar output bias b is made as a plain tensor with requires_grad=True instead of an
nn.Parameter, so it is not in model.parameters() and neither Adam ever updates it.
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--m", type=int, default=32)
parser.add_argument("--width", type=int, default=40)
parser.add_argument("--n_train", type=int, default=48)
parser.add_argument("--n_phys", type=int, default=48)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--data_steps", type=int, default=40)
parser.add_argument("--phys_steps", type=int, default=30)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

LENGTH_SCALE = 0.2


def grf_sample(n, x):
    # zero-mean Gaussian random field with a squared-exponential kernel on the sensor grid
    d = x[:, None].double() - x[None, :].double()
    K = torch.exp(-0.5 * d ** 2 / LENGTH_SCALE ** 2) + 1e-6 * torch.eye(len(x), dtype=torch.float64)
    L = torch.linalg.cholesky(K)
    return (torch.randn(n, len(x), dtype=torch.float64) @ L.T).float()


def antiderivative(u, x):
    dx = x[1:] - x[:-1]
    incr = 0.5 * (u[:, 1:] + u[:, :-1]) * dx
    return torch.cat([torch.zeros(u.shape[0], 1), torch.cumsum(incr, 1)], 1)


class FNN(nn.Module):
    def __init__(self, sizes, last_activation):
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        for lin in self.linears:
            nn.init.xavier_normal_(lin.weight)
            nn.init.zeros_(lin.bias)
        self.last_activation = last_activation

    def forward(self, x):
        for i, lin in enumerate(self.linears):
            x = lin(x)
            if i < len(self.linears) - 1 or self.last_activation:
                x = torch.tanh(x)
        return x


class DeepONet(nn.Module):
    def __init__(self, m, width):
        super().__init__()
        self.branch = FNN([m, width, width], last_activation=False)
        self.trunk = FNN([1, width, width], last_activation=True)
        self.b = torch.tensor(0.0, requires_grad=True)

    def forward(self, u, y):
        # u (B, m) sensor values, y (B, 1) query points -> G(u)(y), shape (B,)
        return (self.branch(u) * self.trunk(y)).sum(-1) + self.b


x = torch.linspace(0, 1, args.m)
u_train = grf_sample(args.n_train, x)
s_train = antiderivative(u_train, x)
u_phys = grf_sample(args.n_phys, x)
u_val = grf_sample(16, x)
s_val = antiderivative(u_val, x)

model = DeepONet(args.m, args.width)

# phase 1: data-driven DeepONet on (u, y, s(y)) triples
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
for step in range(args.data_steps):
    i = torch.randint(0, args.n_train, (args.batch,))
    j = torch.randint(0, args.m, (args.batch,))
    optimizer.zero_grad()
    pred = model(u_train[i], x[j, None])
    loss = ((pred - s_train[i, j]) ** 2).mean()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.data_steps - 1:
        print(f"data step {step:3d}  mse {loss.item():.5f}")


def pi_losses(model, u, i, j):
    # residual ds/dy - u(y) at (u_i, x_j) and the initial condition s(0) = 0
    y = x[j, None].clone().requires_grad_(True)
    s = model(u[i], y)
    ds_dy = torch.autograd.grad(s, y, torch.ones_like(s), create_graph=True)[0][:, 0]
    loss_res = ((ds_dy - u[i, j]) ** 2).mean()
    k = torch.unique(i)
    s0 = model(u[k], torch.zeros(len(k), 1))
    loss_ics = (s0 ** 2).mean()
    return loss_res, loss_ics


# phase 2: physics-informed DeepONet on input functions without labels
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(args.phys_steps):
    i = torch.randint(0, args.n_phys, (args.batch,))
    j = torch.randint(0, args.m, (args.batch,))
    optimizer.zero_grad()
    loss_res, loss_ics = pi_losses(model, u_phys, i, j)
    loss = loss_res + loss_ics
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.phys_steps - 1:
        print(f"phys step {step:3d}  res {loss_res.item():.5f}  ics {loss_ics.item():.5f}")

with torch.no_grad():
    P = args.m
    pred = model(u_val.repeat_interleave(P, 0), x.repeat(len(u_val))[:, None]).view(-1, P)
    rel = ((pred - s_val).norm(dim=1) / s_val.norm(dim=1)).mean()
print(f"validation relative L2 {rel.item():.4f}")

if args.out:
    torch.save({"branch": model.branch.state_dict(), "trunk": model.trunk.state_dict(),
                "b": model.b.detach().clone()}, args.out)
