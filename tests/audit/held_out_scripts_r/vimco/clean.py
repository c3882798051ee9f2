"""VIMCO (variational inference for Monte Carlo objectives) for a tiny sigmoid belief network
with binary latents, written after Mnih and Rezende, "Variational Inference for Monte Carlo
Objectives" (ICML 2016, arXiv:1602.06725): the generative model p(x, h) and the inference network
q(h|x) are trained together on the K-sample bound L = log (1/K) sum_k p(x, h_k) / q(h_k|x) with
h_1..h_K drawn from q; the latents are discrete, so the inference network's gradient is a score
function estimate in which each sample's log q(h_k|x) is weighted by its own learning signal,
L minus the bound recomputed with f(x, h_k) swapped for the geometric mean of the other K - 1
weights (the leave-one-out baseline), plus the weighted reparameterisation-free term that comes
from differentiating the log-weights themselves. With tuananhle7/rrws
(https://github.com/tuananhle7/rrws, code/gmm/losses.py: get_log_weight_and_log_q samples the
latents from the inference network and returns log_weight = log_p - log_q with log_q keeping its
graph, and log_q; get_vimco_loss forms the log evidence logsumexp(log_weight) - log K, for each
particle the control variate from the log-weights with that particle replaced by the mean of the
others' log-weights, and the loss -elbo - mean(sum((log_evidence - control_variate).detach() *
log_q)); code/gmm/train.py train_iwae: one Adam over the parameters of both networks, zero_grad,
backward and step on that loss at every iteration). Here the control variate takes the 1/K of
the paper's bound, the data are binary vectors drawn in the script from a fixed random sigmoid
belief network, and the model has a learnt prior over six binary latents and an MLP decoder.
As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--particles", type=int, default=5, help="K samples per data point")
parser.add_argument("--out", default=None, help="where to save both networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_latent, n_obs, hidden = 6, 16, 32

# data: a fixed random sigmoid belief network with six binary causes
true_w = 3.0 * torch.randn(n_latent, n_obs)
true_b = -1.5 + 0.5 * torch.randn(n_obs)
true_h = torch.bernoulli(torch.full((512, n_latent), 0.3))
data = torch.bernoulli(torch.sigmoid(true_h @ true_w + true_b))


def bernoulli_log_prob(logits, values):
    return -F.binary_cross_entropy_with_logits(logits, values, reduction="none").sum(-1)


class Generative(nn.Module):
    def __init__(self):
        super().__init__()
        self.prior_logits = nn.Parameter(torch.zeros(n_latent))
        self.decoder = nn.Sequential(nn.Linear(n_latent, hidden), nn.Tanh(),
                                     nn.Linear(hidden, n_obs))

    def log_prob(self, h, x):
        """log p(x, h) for latents h (K x B x n_latent) and observations x (B x n_obs)."""
        log_prior = bernoulli_log_prob(self.prior_logits.expand_as(h), h)
        return log_prior + bernoulli_log_prob(self.decoder(h), x.expand(h.shape[0], -1, -1))


generative = Generative()
inference = nn.Sequential(nn.Linear(n_obs, hidden), nn.Tanh(), nn.Linear(hidden, n_latent))
optimizer = torch.optim.Adam(list(generative.parameters()) + list(inference.parameters()),
                             lr=3e-3)

K = args.particles
swap = torch.eye(K, dtype=torch.bool)
for step in range(args.steps):
    x = data[torch.randint(0, data.shape[0], (args.batch_size,))]
    q_logits = inference(x)
    with torch.no_grad():
        h = torch.bernoulli(torch.sigmoid(q_logits).expand(K, -1, -1))
    log_q = bernoulli_log_prob(q_logits.expand(K, -1, -1), h).t()
    log_p = generative.log_prob(h, x).t()
    log_weight = log_p - log_q
    log_evidence = torch.logsumexp(log_weight, 1) - math.log(K)
    # leave-one-out baseline: the bound with sample k's log-weight replaced by the mean of the
    # other K - 1 log-weights (the log of their geometric mean)
    loo_mean = (log_weight.sum(1, keepdim=True) - log_weight) / (K - 1)
    swapped = torch.where(swap, loo_mean.unsqueeze(2), log_weight.unsqueeze(1))
    baseline = torch.logsumexp(swapped, 2) - math.log(K)
    learning_signal = (log_evidence.unsqueeze(1) - baseline).detach()
    loss = -(log_evidence + (learning_signal * log_q).sum(1)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 25 == 0:
        print(f"step {step} bound {log_evidence.mean().item():.3f}")

if args.out:
    torch.save({"generative": generative.state_dict(), "inference": inference.state_dict()},
               args.out)
