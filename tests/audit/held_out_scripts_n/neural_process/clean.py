"""A latent-variable neural process at a tiny size, written after Garnelo, Schwarz, Rosenbaum,
Viola, Rezende, Eslami and Teh, "Neural Processes" (ICML 2018 workshop, arXiv:1807.01622),
section 2, and Kim, Mnih, Schwarz, Garnelo, Eslami, Rosenbaum, Vinyals and Teh, "Attentive
Neural Processes" (ICLR 2019, arXiv:1901.05761), section 2 and figure 2: a deterministic encoder
turns the context pairs into a mean representation r_C, a latent encoder turns a set of pairs
into a Gaussian over the global latent z, the posterior q(z | C, T) read from context and
targets and the conditional prior q(z | C) from the context alone, and a decoder reads (r_C, z,
x_T) for a Gaussian over y_T; the loss is -E_q(z|C,T)[log p(y_T | x_T, r_C, z)] + KL(q(z | C, T)
|| q(z | C)), the KL divided by the number of targets. With deepmind/neural-processes
(https://github.com/deepmind/neural-processes, attentive_neural_process.ipynb: GPCurvesReader;
DeterministicEncoder, LatentEncoder with sigma = 0.1 + 0.9 * sigmoid, Decoder with sigma = 0.1 +
0.9 * softplus; LatentModel.__call__, which builds the prior from the context and, in training,
the posterior from the targets, samples z from the posterior, and takes loss = -mean(log_p -
kl / num_targets) with the KL between the two encoder outputs) and its PyTorch port
soobinseo/Attentive-Neural-Process (https://github.com/soobinseo/Attentive-Neural-Process,
module.py LatentEncoder, whose z = eps * std + mu is reparameterised; network.py
LatentModel.forward and kl_div, the prior's mean and variance with their graph). Data: batches
of curves drawn from a Gaussian process with a squared-exponential kernel, made in the script;
the targets hold the whole curve, the context a random subset of it, as in training there. The
mean aggregation is the notebook's 'uniform' attention. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal, kl_divergence

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--num-points", type=int, default=20)
parser.add_argument("--max-context", type=int, default=10)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden_dim, latent_dim, length_scale, noise = 32, 8, 0.6, 2e-2


def gp_curves(batch, n):
    x = torch.rand(batch, n, 1) * 4 - 2
    kernel = torch.exp(-0.5 * (x - x.transpose(1, 2)) ** 2 / length_scale ** 2)
    chol = torch.linalg.cholesky(kernel + noise ** 2 * torch.eye(n))
    return x, chol @ torch.randn(batch, n, 1)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, n_out))


class DeterministicEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(2, hidden_dim)

    def forward(self, x, y):
        return self.net(torch.cat([x, y], dim=-1)).mean(dim=1)


class LatentEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(2, hidden_dim)
        self.hidden = nn.Linear(hidden_dim, hidden_dim)
        self.mu = nn.Linear(hidden_dim, latent_dim)
        self.log_sigma = nn.Linear(hidden_dim, latent_dim)

    def forward(self, x, y):
        s = F.relu(self.hidden(self.net(torch.cat([x, y], dim=-1)).mean(dim=1)))
        return Normal(self.mu(s), 0.1 + 0.9 * torch.sigmoid(self.log_sigma(s)))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(hidden_dim + latent_dim + 1, 2)

    def forward(self, r, z, x):
        n = x.shape[1]
        h = torch.cat([r.unsqueeze(1).expand(-1, n, -1), z.unsqueeze(1).expand(-1, n, -1), x], -1)
        mu, log_sigma = self.net(h).chunk(2, dim=-1)
        return Normal(mu, 0.1 + 0.9 * F.softplus(log_sigma))


deterministic_encoder = DeterministicEncoder()
latent_encoder = LatentEncoder()
decoder = Decoder()
params = [*deterministic_encoder.parameters(), *latent_encoder.parameters(),
          *decoder.parameters()]
optimizer = torch.optim.Adam(params, lr=args.lr)

for step in range(args.steps):
    target_x, target_y = gp_curves(args.batch_size, args.num_points)
    num_context = int(torch.randint(3, args.max_context + 1, ()))
    context_x, context_y = target_x[:, :num_context], target_y[:, :num_context]
    prior = latent_encoder(context_x, context_y)
    posterior = latent_encoder(target_x, target_y)
    z = posterior.rsample()
    r = deterministic_encoder(context_x, context_y)
    log_p = decoder(r, z, target_x).log_prob(target_y).sum(dim=-1)
    kl = kl_divergence(posterior, prior).sum(dim=-1, keepdim=True)
    loss = -(log_p - kl / args.num_points).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} kl {kl.mean().item():.4f}")

with torch.no_grad():
    target_x, target_y = gp_curves(64, args.num_points)
    r = deterministic_encoder(target_x[:, :5], target_y[:, :5])
    z = latent_encoder(target_x[:, :5], target_y[:, :5]).mean
    print(f"nll from 5 points {-decoder(r, z, target_x).log_prob(target_y).mean().item():.4f}")

if args.out:
    torch.save({**{f"deterministic_encoder.{k}": v
                   for k, v in deterministic_encoder.state_dict().items()},
                **{f"latent_encoder.{k}": v for k, v in latent_encoder.state_dict().items()},
                **{f"decoder.{k}": v for k, v in decoder.state_dict().items()}}, args.out)
