"""Stochastic Gradient Langevin Dynamics for a small Bayesian neural-network classifier.

Paper: Max Welling and Yee Whye Teh, "Bayesian Learning via Stochastic Gradient Langevin
Dynamics", ICML 2011 (Proceedings of the 28th International Conference on Machine Learning,
pp. 681-688).
Reference implementation: JavierAntoran/Bayesian-Neural-Networks,
src/Stochastic_Gradient_Langevin_Dynamics/model.py (Linear_2L: a two-hidden-layer ReLU MLP;
Net_langevin.fit: zero_grad, the mean cross-entropy scaled by N_train to estimate the full-data
negative log-likelihood, backward, SGLD step; Net_langevin.save_sampled_net: a deep copy of the
state_dict per posterior sample; sample_eval: the posterior predictive averaged over the saved
samples), src/Stochastic_Gradient_Langevin_Dynamics/optimizers.py (SGLD.step: a Gaussian prior
gradient added to p.grad, then a half-step-size gradient move plus Gaussian noise of variance
equal to the step size) and train_SGLD_MNIST.py (samples are only saved after a burn-in of
start_save epochs, then every save_every epochs).

The Langevin update of Welling and Teh (eq. 4) is written by hand, under torch.no_grad():
theta <- theta - eps_t / 2 * grad U(theta) + N(0, eps_t), where the potential U is the minibatch
negative log-likelihood scaled by N / n minus the log of a Gaussian prior N(0, prior_sig^2) on
every weight and bias, and the step size decays polynomially, eps_t = a (b + t)^(-gamma). The
data are three overlapping 2-D Gaussian blobs. Phase 1 (burn-in) runs its own loop of Langevin
steps whose states are discarded; phase 2 (sampling) continues the same chain in a second loop,
keeps every thin-th state as a posterior sample (a deep copy of the state_dict) and accumulates
the step-size-weighted posterior predictive on a test grid (Welling and Teh, section 4). Every
step of both loops zeroes the gradients before the backward pass.
Bug: the sampling loop of phase 2 never zeroes the gradients, so every Langevin step there
moves along the sum of every minibatch gradient since the last burn-in step.
"""
import argparse
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_train", type=int, default=192)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--n_hid", type=int, default=32)
parser.add_argument("--prior_sig", type=float, default=1.0)
parser.add_argument("--a", type=float, default=1e-2)
parser.add_argument("--b", type=float, default=10.0)
parser.add_argument("--gamma", type=float, default=0.55)
parser.add_argument("--burn_in", type=int, default=40)
parser.add_argument("--n_sample_steps", type=int, default=40)
parser.add_argument("--thin", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_CLASSES = 3


def make_data(n):
    centers = torch.tensor([[-1.5, 0.0], [1.5, 0.0], [0.0, 1.8]])
    y = torch.randint(0, N_CLASSES, (n,))
    x = centers[y] + 0.9 * torch.randn(n, 2)
    return x, y


class Linear2L(nn.Module):
    def __init__(self, input_dim, output_dim, n_hid):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, n_hid)
        self.fc2 = nn.Linear(n_hid, n_hid)
        self.fc3 = nn.Linear(n_hid, output_dim)
        self.act = nn.ReLU()

    def forward(self, x):
        x = self.act(self.fc1(x))
        x = self.act(self.fc2(x))
        return self.fc3(x)


def log_prior(model):
    sq = sum((p ** 2).sum() for p in model.parameters())
    return -0.5 * sq / args.prior_sig ** 2


def potential(model, xb, yb, n_total):
    # U(theta) = -N/n sum_i log p(y_i | x_i, theta) - log p(theta)
    nll = F.cross_entropy(model(xb), yb, reduction="mean") * n_total
    return nll - log_prior(model)


def step_size(t):
    return args.a * (args.b + t) ** (-args.gamma)


x_train, y_train = make_data(args.n_train)
N = args.n_train
g = torch.linspace(-3.0, 3.0, 12)
x_grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)

model = Linear2L(2, N_CLASSES, args.n_hid)

# phase 1: burn-in, the chain moves towards the posterior and nothing is kept
for t in range(args.burn_in):
    idx = torch.randperm(N)[:args.batch_size]
    model.zero_grad()
    U = potential(model, x_train[idx], y_train[idx], N)
    U.backward()
    eps = step_size(t)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(-0.5 * eps * p.grad + math.sqrt(eps) * torch.randn_like(p))
    if t % 10 == 0:
        print(f"burn-in step {t:3d} eps {eps:.2e} U {U.item():.2f}")

# phase 2: sampling, the same chain continues and every thin-th state is kept
weight_set_samples = []
pred_sum = torch.zeros(x_grid.shape[0], N_CLASSES)
eps_sum = 0.0
for s in range(args.n_sample_steps):
    t = args.burn_in + s
    idx = torch.randperm(N)[:args.batch_size]
    U = potential(model, x_train[idx], y_train[idx], N)
    U.backward()
    eps = step_size(t)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(-0.5 * eps * p.grad + math.sqrt(eps) * torch.randn_like(p))
    if (s + 1) % args.thin == 0:
        weight_set_samples.append(copy.deepcopy(model.state_dict()))
        with torch.no_grad():
            pred_sum += eps * F.softmax(model(x_grid), dim=1)
        eps_sum += eps
    if s % 10 == 0:
        print(f"sampling step {s:3d} eps {eps:.2e} U {U.item():.2f}")

predictive = pred_sum / eps_sum
samples = {k: torch.stack([sd[k] for sd in weight_set_samples])
           for k in weight_set_samples[0]}
with torch.no_grad():
    acc = (model(x_train).argmax(1) == y_train).float().mean()
print(f"{len(weight_set_samples)} samples, last-sample train acc {acc.item():.3f}, "
      f"predictive entropy {-(predictive * predictive.log()).sum(1).mean().item():.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "samples": samples,
                "predictive": predictive}, args.out)
