"""Physics-informed neural network for the viscous Burgers' equation, written after Raissi,
Perdikaris and Karniadakis, "Physics-informed neural networks: A deep learning framework for
solving forward and inverse problems involving nonlinear partial differential equations"
(Journal of Computational Physics 378, 2019; arXiv:1711.10561, Part I, continuous-time
inference): a network u_theta(t, x) is fitted to the initial and boundary data and, at
collocation points inside the domain, to the residual of the PDE,
f = u_t + u * u_x - nu * u_xx with nu = 0.01 / pi, the derivatives taken by automatic
differentiation of the network with respect to its inputs, so that the loss
MSE_u + MSE_f = mean (u(t_u, x_u) - u_data)^2 + mean f(t_f, x_f)^2 is a function of theta
through u and through every derivative in f. With the authors' code, maziarraissi/PINNs
(https://github.com/maziarraissi/PINNs, appendix/continuous_time_inference (Burgers)/Burgers.py,
class PhysicsInformedNN: neural_net rescales the inputs to [-1, 1] and runs a tanh MLP with
Xavier-initialised weights and zero biases; net_f takes u_t, u_x and u_xx with tf.gradients
and returns u_t + u*u_x - nu*u_xx; the loss is the sum of the two mean squares; and
main/continuous_time_inference (Schrodinger)/Schrodinger.py PhysicsInformedNN.train, which runs
Adam for nIter steps and then L-BFGS-B on the same loss) and its PyTorch port jayroxis/PINNs
(https://github.com/jayroxis/PINNs, "Burgers Equation/Burgers Inference (PyTorch).ipynb":
PhysicsInformedNN.net_f takes each derivative with torch.autograd.grad(..., retain_graph=True,
create_graph=True); loss_func, the closure handed to torch.optim.LBFGS with the strong Wolfe
line search, begins with optimizer.zero_grad() and calls loss.backward(); train makes a single
optimizer.step(loss_func) call), whose steps this script follows. Two phases: Adam, then one
L-BFGS call from the Adam solution. The data are made here: u(0, x) = -sin(pi x) on the initial
line, u(t, -1) = u(t, 1) = 0 on the boundaries, uniform random collocation points (with the
initial and boundary points added, as in the reference); the network is smaller (4 x 20 tanh).
Bug: the L-BFGS closure has no lbfgs.zero_grad(), so gradients pile up over its calls."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--adam-steps", type=int, default=150)
parser.add_argument("--lbfgs-iters", type=int, default=50, help="max_iter of the L-BFGS call")
parser.add_argument("--n-u", type=int, default=100, help="initial and boundary points")
parser.add_argument("--n-f", type=int, default=400, help="collocation points")
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the network")
args = parser.parse_args()
torch.manual_seed(args.seed)

nu = 0.01 / torch.pi
lb = torch.tensor([0.0, -1.0])  # (t, x)
ub = torch.tensor([1.0, 1.0])

# initial line t = 0 and the two boundaries x = -1, x = 1; N_u of them are kept
x_init = torch.linspace(-1, 1, 128).unsqueeze(1)
t_bound = torch.linspace(0, 1, 64).unsqueeze(1)
X_u_all = torch.cat([torch.cat([torch.zeros_like(x_init), x_init], 1),
                     torch.cat([t_bound, -torch.ones_like(t_bound)], 1),
                     torch.cat([t_bound, torch.ones_like(t_bound)], 1)])
u_all = torch.cat([-torch.sin(torch.pi * x_init), torch.zeros(2 * len(t_bound), 1)])
keep = torch.randperm(len(X_u_all))[:args.n_u]
t_u, x_u, u_data = X_u_all[keep, 0:1], X_u_all[keep, 1:2], u_all[keep]
X_f = lb + (ub - lb) * torch.rand(args.n_f, 2)
X_f = torch.cat([X_f, X_u_all[keep]])
t_f = X_f[:, 0:1].clone().requires_grad_(True)
x_f = X_f[:, 1:2].clone().requires_grad_(True)


class MLP(nn.Module):
    def __init__(self, layers=(2, 20, 20, 20, 20, 1)):
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(layers[:-1], layers[1:]))
        for linear in self.linears:
            nn.init.xavier_normal_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, t, x):
        h = 2.0 * (torch.cat([t, x], 1) - lb) / (ub - lb) - 1.0
        for linear in self.linears[:-1]:
            h = torch.tanh(linear(h))
        return self.linears[-1](h)


net = MLP()


def net_f(t, x):
    """Burgers' residual u_t + u u_x - nu u_xx at (t, x), differentiable in the weights."""
    u = net(t, x)
    u_t = torch.autograd.grad(u, t, torch.ones_like(u), retain_graph=True, create_graph=True)[0]
    u_x = torch.autograd.grad(u, x, torch.ones_like(u), retain_graph=True, create_graph=True)[0]
    u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), retain_graph=True,
                               create_graph=True)[0]
    return u_t + u * u_x - nu * u_xx


def pinn_loss():
    u_pred = net(t_u, x_u)
    f_pred = net_f(t_f, x_f)
    loss_u = torch.mean((u_data - u_pred) ** 2)
    loss_f = torch.mean(f_pred ** 2)
    return loss_u + loss_f, loss_u, loss_f


# phase 1: Adam
adam = torch.optim.Adam(net.parameters(), lr=args.lr)
for step in range(args.adam_steps):
    loss, loss_u, loss_f = pinn_loss()
    adam.zero_grad()
    loss.backward()
    adam.step()
    if step % 100 == 0:
        print(f"adam {step} loss {loss.item():.4e} u {loss_u.item():.4e} f {loss_f.item():.4e}")

# phase 2: L-BFGS from the Adam solution, one call whose closure evaluates the loss
lbfgs = torch.optim.LBFGS(net.parameters(), lr=1.0, max_iter=args.lbfgs_iters,
                          history_size=50, tolerance_grad=1e-9, tolerance_change=1e-12,
                          line_search_fn="strong_wolfe")
n_evals = 0


def closure():
    global n_evals
    loss, loss_u, loss_f = pinn_loss()
    loss.backward()
    n_evals += 1
    if n_evals % 20 == 0:
        print(f"lbfgs {n_evals} loss {loss.item():.4e} u {loss_u.item():.4e} f {loss_f.item():.4e}")
    return loss


lbfgs.step(closure)

if args.out:
    torch.save({"net": net.state_dict()}, args.out)
