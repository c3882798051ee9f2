"""Stein variational gradient descent for Bayesian logistic regression at a tiny size, written
after Liu and Wang, "Stein Variational Gradient Descent: A General Purpose Bayesian Inference
Algorithm" (NeurIPS 2016, arXiv:1608.04471), algorithm 1 and section 5: a set of particles is
moved along phi(x_i) = 1/n sum_j [k(x_j, x_i) grad log p(x_j) + grad_{x_j} k(x_j, x_i)], with an
RBF kernel whose bandwidth is set by the median heuristic, the first term pulling the particles
towards high posterior density and the second pushing them apart. With
dilinwang820/Stein-Variational-Gradient-Descent (https://github.com/dilinwang820/Stein-
Variational-Gradient-Descent, python/svgd.py SVGD.svgd_kernel: squared pairwise distances, h
from their median divided by log(n + 1), the kernel matrix and the analytic repulsive term, all
on plain numbers; SVGD.update: grad_theta = (K @ dlnprob + dK) / n followed by an AdaGrad step
with momentum; python/bayesian_logistic_regression.py BayesianLR.dlnprob: the parameters are
the weights and log alpha, a Gamma(a0, b0) prior on the precision alpha, N(0, 1/alpha) weights,
the minibatch likelihood rescaled to the full data set and the Jacobian of the log transform)
and the PyTorch port activatedgeek/svgd (https://github.com/activatedgeek/svgd, svgd.py
SVGD.phi and SVGD.step, rbf.py RBF.forward: the kernel is evaluated as K(X, X.detach()) with the
median bandwidth taken on detached distances, the repulsive term is minus the autograd gradient
of its sum with respect to the first argument, the kernel matrix is detached before it
multiplies the score, and a torch optimizer steps the particles after optimizer.zero_grad() and
X.grad = -phi). Here the particles are one leaf tensor stepped by RMSprop (alpha 0.9, close to
the reference's AdaGrad with momentum), and the score is read from the .grad that the
log-posterior's backward writes on that leaf. Data: a two-class problem made in the script.
As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--particles", type=int, default=32)
parser.add_argument("--batch-size", type=int, default=50)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the particles")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_data, d = 400, 6
a0, b0 = 1.0, 0.01
true_w = torch.randn(d)
data_x = torch.cat([torch.randn(n_data, d - 1), torch.ones(n_data, 1)], 1)
data_y = torch.where(torch.rand(n_data) < torch.sigmoid(data_x @ true_w), 1.0, -1.0)


def log_posterior(theta, xb, yb):
    """Unnormalised log posterior of every particle (rows of theta: the weights, then log alpha)."""
    w, log_alpha = theta[:, :-1], theta[:, -1]
    alpha = log_alpha.exp()
    log_lik = F.logsigmoid(yb.unsqueeze(0) * (w @ xb.t())).sum(1) * (n_data / xb.shape[0])
    log_prior_w = 0.5 * d * log_alpha - 0.5 * alpha * w.pow(2).sum(1)
    log_prior_alpha = a0 * log_alpha - b0 * alpha  # Gamma prior on alpha, with the log Jacobian
    return log_lik + log_prior_w + log_prior_alpha


def rbf_kernel(x, y):
    """k(x_i, y_j) = exp(-|x_i - y_j|^2 / h), h = med^2 / log(n + 1) on detached distances."""
    sq_dist = (x.unsqueeze(1) - y.unsqueeze(0)).pow(2).sum(-1)
    h = sq_dist.detach().median() / math.log(x.shape[0] + 1)
    return torch.exp(-sq_dist / (h + 1e-8)), h


# initial particles: log alpha from the prior, the weights from N(0, 1/alpha)
alpha0 = torch.distributions.Gamma(a0, 1.0).sample((args.particles,)).clamp(min=1e-2)
theta = torch.cat([torch.randn(args.particles, d) / alpha0.sqrt().unsqueeze(1),
                   alpha0.log().unsqueeze(1)], 1).requires_grad_(True)
optimizer = torch.optim.RMSprop([theta], lr=args.lr, alpha=0.9)

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    xb, yb = data_x[idx], data_y[idx]

    # score of every particle: the backward of the summed log posterior fills theta.grad
    optimizer.zero_grad()
    log_p = log_posterior(theta, xb, yb)
    log_p.sum().backward()
    score = theta.grad.detach().clone()

    # kernel on the current particles; the repulsive term through its first argument only
    x = theta.detach().requires_grad_(True)
    k_xx, bandwidth = rbf_kernel(x, x.detach())
    grad_k = -torch.autograd.grad(k_xx.sum(), x)[0]
    phi = (k_xx.detach() @ score + grad_k) / args.particles

    # ascent along phi with a torch optimizer: .grad = -phi
    theta.grad = -phi
    optimizer.step()
    if step % 20 == 0:
        acc = (torch.sigmoid(data_x @ theta[:, :-1].detach().t()).mean(1) > 0.5).float()
        acc = (acc == (data_y > 0).float()).float().mean().item()
        print(f"step {step} log p {log_p.mean().item():.2f} h {bandwidth.item():.3f} acc {acc:.3f}")

if args.out:
    torch.save({"theta": theta.detach().clone(), "bandwidth": bandwidth.detach().clone()}, args.out)
