"""Bootstrapping error accumulation reduction (BEAR) for offline RL at a tiny size, written after
Kumar, Fu, Tucker and Levine, "Stabilizing Off-Policy Q-Learning via Bootstrapping Error
Reduction" (NeurIPS 2019, arXiv:1906.00949), algorithm 1: from a fixed data set only, an
ensemble of Q functions is trained on a target that takes a soft minimum over the ensemble of
target critics and a maximum over actions the target actor samples at the next state; a VAE fits
the behaviour policy; the actor maximises the conservative value (the minimum of the ensemble,
less a multiple of its spread) under the constraint that the MMD between its action samples and
the behaviour model's stays below a threshold, with a Lagrange multiplier learnt by dual ascent.
With aviralkumar2907/BEAR (https://github.com/aviralkumar2907/BEAR, algos.py: RegularActor
(sample_multiple: tanh-Gaussian samples with the noise clamped to [-0.5, 0.5], returning the
pre-tanh values too), EnsembleCritic, VAE (decode_multiple), and BEAR.train: per iteration the
VAE step on reconstruction plus KL; the critic target under torch.no_grad() from critic_target
and actor_target on ten copies of the next state, 0.75 min + 0.25 max over the ensemble, the
max over the copies, bootstrap masks on the per-critic squared errors, then
critic_optimizer.zero_grad(), backward and step; the Laplacian-kernel MMD on raw actions between
vae.decode_multiple and actor.sample_multiple; the actor's Q values from self.critic on its
sampled actions, averaged over the samples, their spread over the ensemble, and the minimum;
a warm start during which the actor loss is the weighted MMD alone, then -Q + lambda * k * std +
exp(log_lagrange2) * MMD; actor_optimizer.zero_grad(), backward and step; then
lagrange2_opt.zero_grad(), the negated Lagrangian's backward and a step of the Adam over
[log_lagrange2] alone, clamped to [-5, lagrange_thresh]; and Polyak updates of both targets,
which __init__ builds as separate networks with load_state_dict). Here the constraint term of
the Lagrangian is detached, which gives log_lagrange2 the gradient the reference's backward
gives it. The data: a point mass on the plane driven towards a goal by a noisy, biased
behaviour policy, made in the script.
Bug: the target critic is bound to the critic itself, critic_target = critic, where a separate copy
is meant (BEAR.__init__ builds critic_target as a second EnsembleCritic and loads the critic's
state_dict into it), so the Polyak update copies each weight onto itself and, from the second
iteration on, the Bellman target is computed by the critic that is being trained on it, under
torch.no_grad() but with its latest weights: the slowly moving target that damps the
bootstrapping error is gone."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=40)
parser.add_argument("--warmup", type=int, default=15, help="iterations of MMD-only actor loss")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--num-samples", type=int, default=5, help="samples for the MMD")
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden, num_qs = 2, 2, 32, 2
lambda_, delta_conf, mmd_sigma, thresh, lagrange_thresh = 0.4, 0.1, 5.0, 0.05, 10.0

# offline data: a point mass stepped by a noisy behaviour policy biased off the goal direction
n_data, goal = 2000, torch.tensor([1.0, 1.0])
states = torch.rand(n_data, state_dim) * 4 - 2
heading = (goal - states) / (goal - states).norm(dim=1, keepdim=True)
actions = (0.6 * heading + 0.3 * torch.tensor([1.0, -1.0]) + 0.3 * torch.randn(n_data, 2))
actions = actions.clamp(-0.99, 0.99)
next_states = states + 0.3 * actions
rewards = -(next_states - goal).norm(dim=1, keepdim=True)
not_dones = (next_states.abs().max(1, keepdim=True)[0] < 2.5).float()
boot_masks = (torch.rand(n_data, num_qs) < 0.8).float()


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, o))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU())
        self.mean, self.log_std = nn.Linear(hidden, action_dim), nn.Linear(hidden, action_dim)

    def sample_multiple(self, state, num_sample):
        h = self.body(state)
        mean, std = self.mean(h), self.log_std(h).exp()
        noise = torch.randn(state.shape[0], num_sample, action_dim).clamp(-0.5, 0.5)
        raw = mean.unsqueeze(1) + std.unsqueeze(1) * noise
        return torch.tanh(raw), raw

    def forward(self, state):
        h = self.body(state)
        return torch.tanh(self.mean(h) + self.log_std(h).exp() * torch.randn(state.shape[0], action_dim))


class EnsembleCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.qs = nn.ModuleList([mlp(state_dim + action_dim, 1) for _ in range(num_qs)])

    def forward(self, state, action):
        sa = torch.cat([state, action], -1)
        return torch.stack([q(sa) for q in self.qs], 0)  # num_qs x B x 1


class VAE(nn.Module):
    def __init__(self, latent_dim=2 * action_dim):
        super().__init__()
        self.latent_dim = latent_dim
        self.enc = nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.ReLU())
        self.mean, self.log_std = nn.Linear(hidden, latent_dim), nn.Linear(hidden, latent_dim)
        self.dec = mlp(state_dim + latent_dim, action_dim)

    def forward(self, state, action):
        h = self.enc(torch.cat([state, action], 1))
        mean, std = self.mean(h), self.log_std(h).clamp(-4, 15).exp()
        z = mean + std * torch.randn_like(std)
        return torch.tanh(self.dec(torch.cat([state, z], 1))), mean, std

    def decode_multiple(self, state, num_decode):
        z = torch.randn(state.shape[0], num_decode, self.latent_dim).clamp(-0.5, 0.5)
        raw = self.dec(torch.cat([state.unsqueeze(1).expand(-1, num_decode, -1), z], 2))
        return torch.tanh(raw), raw


def mmd_loss_laplacian(samples1, samples2, sigma):
    """MMD between two sets of samples per state (B x N x d) with a Laplacian kernel."""
    def k_mean(a, b):
        return (-(a.unsqueeze(2) - b.unsqueeze(1)).abs().sum(-1) / (2.0 * sigma)).exp().mean((1, 2))
    return (k_mean(samples1, samples1) + k_mean(samples2, samples2)
            - 2.0 * k_mean(samples1, samples2) + 1e-6).sqrt()


actor = Actor()
actor_target = copy.deepcopy(actor)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic = EnsembleCritic()
critic_target = critic
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
vae = VAE()
vae_optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3)
log_lagrange2 = torch.randn((), requires_grad=True)
lagrange2_opt = torch.optim.Adam([log_lagrange2], lr=1e-2)
std_coef = lambda_ * math.sqrt((1 - delta_conf) / delta_conf)

for it in range(args.iterations):
    idx = torch.randint(0, n_data, (args.batch_size,))
    state, action, next_state = states[idx], actions[idx], next_states[idx]
    reward, not_done, mask = rewards[idx], not_dones[idx], boot_masks[idx]

    # behaviour model
    recon, mean, std = vae(state, action)
    kl_loss = -0.5 * (1 + torch.log(std.pow(2)) - mean.pow(2) - std.pow(2)).mean()
    vae_loss = F.mse_loss(recon, action) + 0.5 * kl_loss
    vae_optimizer.zero_grad()
    vae_loss.backward()
    vae_optimizer.step()

    # critic: soft clipped double-Q target over ten actor samples at the next state
    with torch.no_grad():
        state_rep = next_state.repeat_interleave(10, 0)
        target_qs = critic_target(state_rep, actor_target(state_rep))
        target_q = 0.75 * target_qs.min(0)[0] + 0.25 * target_qs.max(0)[0]
        target_q = target_q.view(args.batch_size, -1).max(1)[0].view(-1, 1)
        target_q = reward + not_done * args.discount * target_q
    current_qs = critic(state, action)
    critic_loss = sum((F.mse_loss(current_qs[i], target_q, reduction="none") * mask[:, i:i + 1]).mean()
                      for i in range(num_qs))
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    # actor: conservative value under the MMD support constraint
    sampled_actions, raw_sampled_actions = vae.decode_multiple(state, args.num_samples)
    actor_actions, raw_actor_actions = actor.sample_multiple(state, args.num_samples)
    mmd_loss = mmd_loss_laplacian(raw_sampled_actions, raw_actor_actions, mmd_sigma)
    state_samples = state.unsqueeze(1).expand(-1, args.num_samples, -1).reshape(-1, state_dim)
    critic_qs = critic(state_samples, actor_actions.reshape(-1, action_dim))
    critic_qs = critic_qs.view(num_qs, args.batch_size, args.num_samples).mean(2)
    std_q = critic_qs.std(0, unbiased=False)
    critic_qs = critic_qs.min(0)[0]
    if it >= args.warmup:
        actor_loss = (-critic_qs + std_coef * std_q + log_lagrange2.exp() * mmd_loss).mean()
    else:
        actor_loss = (log_lagrange2.exp() * mmd_loss).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()

    # dual ascent on the multiplier, on the detached constraint
    lagrange_loss = (log_lagrange2.exp() * (mmd_loss.detach() - thresh)).mean()
    lagrange2_opt.zero_grad()
    (-lagrange_loss).backward()
    lagrange2_opt.step()
    log_lagrange2.data.clamp_(min=-5.0, max=lagrange_thresh)

    # Polyak averaging of both targets
    with torch.no_grad():
        for param, target_param in zip(critic.parameters(), critic_target.parameters()):
            target_param.copy_(args.tau * param + (1 - args.tau) * target_param)
        for param, target_param in zip(actor.parameters(), actor_target.parameters()):
            target_param.copy_(args.tau * param + (1 - args.tau) * target_param)
    if it % 10 == 0:
        print(f"it {it} vae {vae_loss.item():.3f} critic {critic_loss.item():.3f} "
              f"actor {actor_loss.item():.3f} mmd {mmd_loss.mean().item():.3f} "
              f"lagrange {log_lagrange2.exp().item():.3f}")

if args.out:
    torch.save({**{f"actor.{k}": v for k, v in actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in critic.state_dict().items()},
                **{f"critic_target.{k}": v for k, v in critic_target.state_dict().items()},
                **{f"vae.{k}": v for k, v in vae.state_dict().items()},
                "log_lagrange2": log_lagrange2.detach().clone()}, args.out)
