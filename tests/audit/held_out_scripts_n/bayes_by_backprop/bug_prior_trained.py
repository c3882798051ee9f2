"""Bayes by Backprop at a tiny size, written after Blundell, Cornebise, Kavukcuoglu and Wierstra,
"Weight Uncertainty in Neural Networks" (ICML 2015, arXiv:1505.05424), sections 3.1-3.4: every
weight has a diagonal Gaussian posterior q(w | theta), theta = (mu, rho) and sigma = log(1 +
exp(rho)); each forward pass draws w = mu + sigma * eps with eps ~ N(0, I), the
reparameterisation that lets the gradient of the cost reach mu and rho; the prior is a fixed
scale mixture of two zero-mean Gaussians (equation 7, -log sigma_1 = 0, -log sigma_2 = 6, pi =
1/2); and a minibatch's cost is (log q(w | theta) - log P(w)) / M + the negative log-likelihood,
the complexity cost spread over the M minibatches of an epoch (equation 8), averaged over a few
weight samples. With nitarshan/bayes-by-backprop (https://github.com/nitarshan/bayes-by-backprop,
Weight Uncertainty in Neural Networks.ipynb: Gaussian, whose sigma is torch.log1p(torch.exp(rho))
and whose sample is mu + sigma * epsilon; ScaleMixtureGaussian, whose pi and sigmas are fixed
tensors; BayesianLinear, whose weight_mu, weight_rho, bias_mu and bias_rho are nn.Parameters and
whose forward keeps log_prior and log_variational_posterior of the sampled weights;
BayesianNetwork.sample_elbo; the Adam over net.parameters()). Data: the paper's regression curve
of section 5.2, y = x + 0.3 sin(2 pi (x + e)) + 0.3 sin(4 pi (x + e)) + e, e ~ N(0, 0.02), made
in the script, with a Gaussian likelihood of fixed noise.
Injected bug: the prior's log scales are made an nn.Parameter for a buffer, to have them follow the
module to its device and into its state_dict (the paper's prior is fixed, and the notebook's
ScaleMixtureGaussian holds pi and the sigmas as fixed tensors, no parameters), so the Adam over
net.parameters() also trains them: the log-prior of the complexity cost fits its scales to the
sampled weights, an empirical-Bayes prior that shrinks the complexity cost, and the posterior is
regularised towards a moving target."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--n-train", type=int, default=128)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--samples", type=int, default=2, help="weight samples per minibatch")
parser.add_argument("--noise-std", type=float, default=0.15)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden_dim, prior_pi = 32, 0.5
num_batches = args.n_train // args.batch_size
x_train = torch.rand(args.n_train, 1) * 0.5
eps = torch.randn(args.n_train, 1) * 0.02 ** 0.5
y_train = (x_train + 0.3 * torch.sin(2 * math.pi * (x_train + eps))
           + 0.3 * torch.sin(4 * math.pi * (x_train + eps)) + eps)


def gaussian_log_prob(w, mu, sigma):
    return -0.5 * math.log(2 * math.pi) - torch.log(sigma) - (w - mu) ** 2 / (2 * sigma ** 2)


class ScaleMixturePrior(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_sigmas = nn.Parameter(torch.tensor([0.0, -6.0]))

    def log_prob(self, w):
        sigma_1, sigma_2 = self.log_sigmas.exp()
        p1 = gaussian_log_prob(w, 0.0, sigma_1) + math.log(prior_pi)
        p2 = gaussian_log_prob(w, 0.0, sigma_2) + math.log(1 - prior_pi)
        return torch.logaddexp(p1, p2).sum()


class BayesianLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight_mu = nn.Parameter(torch.empty(n_out, n_in).uniform_(-0.2, 0.2))
        self.weight_rho = nn.Parameter(torch.empty(n_out, n_in).uniform_(-5, -4))
        self.bias_mu = nn.Parameter(torch.empty(n_out).uniform_(-0.2, 0.2))
        self.bias_rho = nn.Parameter(torch.empty(n_out).uniform_(-5, -4))
        self.prior = ScaleMixturePrior()

    def forward(self, x):
        weight_sigma = torch.log1p(torch.exp(self.weight_rho))
        bias_sigma = torch.log1p(torch.exp(self.bias_rho))
        weight = self.weight_mu + weight_sigma * torch.randn_like(weight_sigma)
        bias = self.bias_mu + bias_sigma * torch.randn_like(bias_sigma)
        self.log_prior = self.prior.log_prob(weight) + self.prior.log_prob(bias)
        self.log_variational_posterior = (
            gaussian_log_prob(weight, self.weight_mu, weight_sigma).sum()
            + gaussian_log_prob(bias, self.bias_mu, bias_sigma).sum())
        return x @ weight.t() + bias


class BayesianNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([BayesianLinear(1, hidden_dim),
                                     BayesianLinear(hidden_dim, hidden_dim),
                                     BayesianLinear(hidden_dim, 1)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == len(self.layers) - 1 else torch.relu(layer(x))
        return x

    def sample_elbo(self, x, y):
        log_priors, log_posteriors, nlls = [], [], []
        for _ in range(args.samples):
            out = self(x)
            log_priors.append(sum(layer.log_prior for layer in self.layers))
            log_posteriors.append(sum(layer.log_variational_posterior for layer in self.layers))
            nlls.append(-gaussian_log_prob(y, out, torch.tensor(args.noise_std)).sum())
        complexity = (torch.stack(log_posteriors).mean() - torch.stack(log_priors).mean())
        return complexity / num_batches + torch.stack(nlls).mean(), complexity


net = BayesianNetwork()
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
for step in range(args.steps):
    perm = torch.randperm(args.n_train)[:args.batch_size]
    loss, complexity = net.sample_elbo(x_train[perm], y_train[perm])
    net.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.2f} complexity {complexity.item():.1f}")

with torch.no_grad():
    x_test = torch.linspace(-0.2, 0.7, 10).unsqueeze(1)
    preds = torch.stack([net(x_test) for _ in range(20)])
    print(f"mean predictive std on [-0.2, 0.7] {preds.std(0).mean().item():.4f}")

if args.out:
    saved = {}
    for i, layer in enumerate(net.layers):
        for k in ("weight_mu", "weight_rho", "bias_mu", "bias_rho"):
            saved[f"layers.{i}.{k}"] = getattr(layer, k).detach().clone()
        saved[f"layers.{i}.prior.log_sigmas"] = layer.prior.log_sigmas.detach().clone()
    torch.save(saved, args.out)
