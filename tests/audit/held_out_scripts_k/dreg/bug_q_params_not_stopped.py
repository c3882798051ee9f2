"""An importance-weighted autoencoder trained with the doubly reparameterized gradient estimator at
a tiny size, written after Tucker, Lawson, Gu and Maddison, "Doubly Reparameterized Gradient
Estimators for Monte Carlo Objectives" (ICLR 2019, arXiv:1810.04152), section 3 and equation 5 (the
inference network's gradient of the IWAE bound is sum_i w~_i^2 d log w_i / d z_i dz_i/dphi, the
normalised importance weights w~_i held fixed and the proposal's parameters stopped inside log q(z_i
| x) while z_i keeps its reparameterised path), which builds on Roeder, Wu and Duvenaud, "Sticking
the Landing: Simple, Lower-Variance Gradient Estimators for Variational Inference" (NeurIPS 2017,
arXiv:1703.09194), and after the authors' code in google-research/google-research
(https://github.com/google-research/google-research, dreg_estimators/model.py: iwae, with
ConditionalNormal.__call__(..., stop_gradient=True) for stopped_log_q_z, normalized_weights under
tf.stop_gradient and the "dreg" estimator sum(sq_normalized_weights * stopped_log_weights); and
dreg_estimators/main_loop.py main: the model's loss, minus the IWAE bound, differentiated with
respect to the model's variables only, the inference loss with respect to the proposal's only, both
applied by one Adam). A Gaussian proposal network and a Bernoulli likelihood network with a standard
normal prior; binary observations made in the script from a clustered two-dimensional latent.
Injected bug: the stop-gradient inside log q is put on the sample instead of on the proposal's
parameters (normal_log_prob(z.detach(), mu, sigma), the stopped_z_log_q_z of the reference's RWS
estimator, for normal_log_prob(z, mu.detach(), sigma.detach())), so the inference loss
differentiates log q(z | x) through mu and sigma at a fixed z, the score term that the doubly
reparameterized estimator removes, and no longer through z: the proposal is trained on sum_i w~_i^2
(d log p(x, z_i) / dz_i dz_i/dphi - d log q(z_i | x) / dphi)."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-samples", type=int, default=8, help="K, importance samples")
parser.add_argument("--latent-dim", type=int, default=2)
parser.add_argument("--hidden-dim", type=int, default=32)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, n_data = 12, 512
centres = 2 * torch.randn(4, args.latent_dim)
codes = centres[torch.randint(0, 4, (n_data,))] + 0.3 * torch.randn(n_data, args.latent_dim)
data = torch.bernoulli(torch.sigmoid(2 * codes @ torch.randn(args.latent_dim, obs_dim)))
mean_x = data.mean(0).clamp(1e-3, 1 - 1e-3)


class Proposal(nn.Module):
    """q(z | x) = N(mu(x), diag(sigma(x)^2)) from a tanh network on the mean-centred input."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, args.hidden_dim), nn.Tanh(),
                                 nn.Linear(args.hidden_dim, 2 * args.latent_dim))

    def forward(self, x):
        mu, raw_sigma = self.net(x - mean_x).chunk(2, dim=-1)
        return mu, F.softplus(raw_sigma + 0.25)


def normal_log_prob(z, mu, sigma):
    log_density = -0.5 * ((z - mu) / sigma).pow(2) - sigma.log() - 0.5 * math.log(2 * math.pi)
    return log_density.sum(-1)


proposal = Proposal()
likelihood = nn.Sequential(nn.Linear(args.latent_dim, args.hidden_dim), nn.Tanh(),
                           nn.Linear(args.hidden_dim, obs_dim))
with torch.no_grad():
    likelihood[2].bias.copy_(torch.log(mean_x / (1 - mean_x)))
optimizer = torch.optim.Adam([*proposal.parameters(), *likelihood.parameters()], lr=args.lr)
k = args.num_samples
zero, one = torch.zeros(()), torch.ones(())
for step in range(args.steps):
    x = data[torch.randint(0, n_data, (args.batch_size,))]
    mu, sigma = proposal(x)
    z = mu + sigma * torch.randn(k, *mu.shape)  # [K, batch, latent], reparameterised
    log_p_z = normal_log_prob(z, zero, one)
    logits = likelihood(z)
    log_p_x = -F.binary_cross_entropy_with_logits(logits, x.expand(k, -1, -1),
                                                  reduction="none").sum(-1)
    log_w = log_p_z + log_p_x - normal_log_prob(z, mu, sigma)
    iwae_bound = (torch.logsumexp(log_w, 0) - math.log(k)).mean()
    # DReG: the proposal's parameters stopped inside log q, z keeps its path through mu, sigma
    stopped_log_w = log_p_z + log_p_x - normal_log_prob(z.detach(), mu, sigma)
    weights = torch.softmax(log_w, 0).detach()
    inference_loss = -(weights.pow(2) * stopped_log_w).sum(0).mean()
    model_loss = -iwae_bound
    optimizer.zero_grad()
    model_loss.backward(inputs=list(likelihood.parameters()), retain_graph=True)
    inference_loss.backward(inputs=list(proposal.parameters()))
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} iwae bound {iwae_bound.item():.4f}")

with torch.no_grad():
    mu, _ = proposal(data)
print("posterior mean spread:", " ".join(f"{s:.4f}" for s in mu.std(0).tolist()))

if args.out:
    torch.save({"proposal": proposal.state_dict(), "likelihood": likelihood.state_dict()},
               args.out)
