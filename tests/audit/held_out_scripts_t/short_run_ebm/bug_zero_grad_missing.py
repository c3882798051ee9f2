"""Short-run MCMC energy-based model on a tiny 2-D data set, written after Nijkamp, Hill, Zhu
and Wu, "Learning Non-Convergent Non-Persistent Short-Run MCMC Toward Energy-Based Model"
(NeurIPS 2019, arXiv:1904.09770): an energy network f_theta(x) (here the negative energy, the
model density being proportional to exp(f_theta(x))) is learned by maximum likelihood with the
intractable model expectation replaced by samples of a short-run, non-persistent Langevin chain,
K steps started afresh every iteration from uniform noise, x_{k+1} = x_k + (s^2 / 2) grad_x
f(x_k) + s_n * noise; the learning gradient is that of L = mean f(x_data) - mean f(x_K), with
the chain's samples x_K treated as fixed points: no gradient flows back through the chain into
theta. With the authors' code, enijkamp/short_run (https://github.com/enijkamp/short_run,
train_cifar10_minimal.py: sample_p_0 draws uniform noise; sample_q runs K steps of f_prime =
t.autograd.grad(f(x_k).sum(), [x_k]) and x_k.data += f_prime + 1e-2 * noise, and returns
x_k.detach(); sample_p_d adds a little Gaussian noise to the data; the loop computes
L = f(x_p_d).mean() - f(x_q).mean(), then optim.zero_grad(), (-L).backward(), optim.step() with
Adam). This script follows those steps, with the Langevin step written out-of-place on a
leaf that requires grad and an explicit step size; torch.autograd.grad with respect to the
chain's state leaves the network's .grad untouched. The data are a mixture of four Gaussians,
f_theta is a small MLP with smooth (SiLU) activations, and K = 20.
Bug: the gradients are never cleared, optimizer.zero_grad() is missing from the training loop,
where enijkamp/short_run's train_cifar10_minimal.py calls optim.zero_grad() right before
(-L).backward() in every iteration: the energy network's .grad holds the running sum of the
learning gradients of all iterations so far, each taken at earlier parameters with other data
and other short-run samples, and Adam steps on that stale, growing sum instead of the current
contrastive-divergence gradient, from the second update (iteration 1) on."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--k-steps", type=int, default=20, help="K, the short-run chain's length")
parser.add_argument("--step-size", type=float, default=0.4, help="s in (s^2 / 2) grad f")
parser.add_argument("--noise", type=float, default=0.01, help="the chain's noise scale")
parser.add_argument("--data-noise", type=float, default=0.03)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the energy network")
args = parser.parse_args()
torch.manual_seed(args.seed)

modes = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])


def sample_p_d(n):
    x = modes[torch.randint(0, 4, (n,))] + 0.2 * torch.randn(n, 2)
    return x + args.data_noise * torch.randn_like(x)


def sample_p_0(n):
    return torch.rand(n, 2) * 4 - 2


f = nn.Sequential(nn.Linear(2, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1))


def sample_q(n):
    """K steps of Langevin dynamics on f from noise; the samples come back without a graph."""
    x_k = sample_p_0(n).requires_grad_(True)
    for _ in range(args.k_steps):
        f_prime = torch.autograd.grad(f(x_k).sum(), x_k)[0]
        x_k = x_k + 0.5 * args.step_size ** 2 * f_prime + args.noise * torch.randn_like(x_k)
    return x_k.detach()


optimizer = torch.optim.Adam(f.parameters(), lr=args.lr, betas=(0.9, 0.999))
for step in range(args.steps):
    x_p_d, x_q = sample_p_d(args.batch_size), sample_q(args.batch_size)
    f_data, f_model = f(x_p_d).mean(), f(x_q).mean()
    loss = -(f_data - f_model)
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} f(x_p_d) {f_data.item():.4f} f(x_q) {f_model.item():.4f}")

if args.out:
    torch.save({"f": f.state_dict()}, args.out)
