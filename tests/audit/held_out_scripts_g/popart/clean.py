"""PopArt value normalisation at a tiny size, written after van Hasselt, Guez, Hessel, Mnih and
Silver, "Learning values across many orders of magnitude" (NeurIPS 2016, arXiv:1602.07714),
Algorithm 1, with the PopArt layers of aluscher/torchbeastpopart
(https://github.com/aluscher/torchbeastpopart, torchbeast/core/popart.py PopArtLayer) and of
marlbenchmark/on-policy (https://github.com/marlbenchmark/on-policy,
onpolicy/algorithms/utils/popart.py PopArt). The value network's last layer predicts values
normalised by running first and second moments of the targets, kept in buffers. For each batch
the statistics are first updated from the targets under torch.no_grad(), and the layer's weight
and bias are rescaled in the same no_grad update (through .data, as in torchbeastpopart) so that
its unnormalised outputs are preserved; then the normalised prediction is regressed by MSE onto the
target normalised with the new statistics. The targets are n-step returns whose bootstrap value,
the network's own denormalised prediction at the last state of the segment, is cut from the graph
(.detach()), so that the targets are constants. Segments of a small nonlinear Gaussian process
whose reward scale grows a thousandfold over the run, made in the script. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--horizon", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--beta", type=float, default=0.2, help="step size of the statistics")
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, hidden = 6, 32
transition = torch.randn(state_dim, state_dim) / math.sqrt(state_dim)
reward_weights = torch.randn(state_dim)


def rollout(batch_size, scale):
    """Segments of `horizon` steps from random start states; the rewards are multiplied by scale."""
    states = torch.randn(batch_size, state_dim)
    x, rewards = states, []
    for _ in range(args.horizon):
        rewards.append(scale * (x @ reward_weights + 2.0))
        x = torch.tanh(x @ transition) + 0.3 * torch.randn(batch_size, state_dim)
    return states, torch.stack(rewards, dim=1), x


class PopArt(nn.Module):
    def __init__(self, in_features, out_features, beta):
        super().__init__()
        self.beta = beta
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        self.register_buffer("mu", torch.zeros(out_features))
        self.register_buffer("nu", torch.ones(out_features))
        self.register_buffer("sigma", torch.ones(out_features))
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, features):
        return F.linear(features, self.weight, self.bias)  # normalised values

    def normalize(self, values):
        return (values - self.mu) / self.sigma

    def denormalize(self, values):
        return values * self.sigma + self.mu

    @torch.no_grad()
    def update(self, targets):
        old_mu, old_sigma = self.mu, self.sigma
        self.mu = (1 - self.beta) * self.mu + self.beta * targets.mean(0)
        self.nu = (1 - self.beta) * self.nu + self.beta * targets.pow(2).mean(0)
        self.sigma = (self.nu - self.mu ** 2).clamp(min=1e-8).sqrt()
        # preserve outputs: sigma' * (W' h + b') + mu' == sigma * (W h + b) + mu
        self.weight.data = self.weight.data * (old_sigma / self.sigma).unsqueeze(1)
        self.bias.data = (old_sigma * self.bias.data + old_mu - self.mu) / self.sigma


torso = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
head = PopArt(hidden, 1, args.beta)
critic = nn.Sequential(torso, head)
optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
discounts = args.gamma ** torch.arange(args.horizon).float()
for step in range(args.steps):
    scale = 10 ** (3 * step / args.steps)  # the reward scale drifts from 1 to about 1000
    states, rewards, last_states = rollout(args.batch_size, scale)
    next_values = critic(last_states).detach()
    bootstrap = args.gamma ** args.horizon * head.denormalize(next_values)
    returns = (rewards @ discounts).unsqueeze(1) + bootstrap  # (batch, 1)
    head.update(returns)
    values = critic(states)
    loss = F.mse_loss(values, head.normalize(returns))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} scale {scale:.1f} sigma {head.sigma.item():.2f} loss {loss.item():.4f}")

if args.out:
    torch.save(critic.state_dict(), args.out)
