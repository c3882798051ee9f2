"""Batch-constrained deep Q-learning at a tiny size, written after Fujimoto, Meger and Precup,
"Off-Policy Deep Reinforcement Learning without Exploration" (ICML 2019, arXiv:1812.02900),
algorithm 1, with sfujim/BCQ (https://github.com/sfujim/BCQ, continuous_BCQ/BCQ.py: VAE.forward,
which draws the latent by the reparameterisation z = mean + std * eps, and VAE.decode, which
clips a prior sample to [-0.5, 0.5]; Actor, the perturbation model xi_phi(s, a) bounded by
phi * max_action; Critic with two Q heads and Critic.q1; BCQ.train, which each iteration trains
the VAE on the batch's actions (vae_optimizer.zero_grad() just before vae_loss.backward()), the
twin critics on the soft clipped double-Q target taken under torch.no_grad() over ten decoded
and perturbed actions per next state, and the actor through critic.q1 on perturbed decoded
actions, then moves both target networks, made by copy.deepcopy, by a polyak average). A fixed
batch of transitions of a noisy scripted controller on a point-reaching task, made in the
script; no environment interaction while training. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=25)
parser.add_argument("--dataset-size", type=int, default=400)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--lmbda", type=float, default=0.75)
parser.add_argument("--phi", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden_dim, max_action = 4, 2, 32, 1.0
latent_dim = 2 * action_dim


def make_dataset(n):
    """A point and a goal; the behaviour policy steers towards the goal with heavy noise."""
    state = 2 * torch.rand(n, state_dim) - 1
    action = (state[:, 2:] - state[:, :2] + 0.4 * torch.randn(n, action_dim)).clamp(-1, 1)
    position = (state[:, :2] + 0.3 * action).clamp(-1, 1)
    next_state = torch.cat([position, state[:, 2:]], dim=1)
    reward = -(position - state[:, 2:]).norm(dim=1, keepdim=True)
    return state, action, next_state, reward, torch.ones(n, 1)


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim + action_dim, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, action_dim))

    def forward(self, state, action):
        a = args.phi * max_action * torch.tanh(self.net(torch.cat([state, action], 1)))
        return (a + action).clamp(-max_action, max_action)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.l2 = nn.Linear(hidden_dim, 1)
        self.l3 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.l4 = nn.Linear(hidden_dim, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l2(F.relu(self.l1(sa))), self.l4(F.relu(self.l3(sa)))

    def q1(self, state, action):
        return self.l2(F.relu(self.l1(torch.cat([state, action], 1))))


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.mean = nn.Linear(hidden_dim, latent_dim)
        self.log_std = nn.Linear(hidden_dim, latent_dim)
        self.d1 = nn.Linear(state_dim + latent_dim, hidden_dim)
        self.d2 = nn.Linear(hidden_dim, action_dim)

    def forward(self, state, action):
        h = F.relu(self.e1(torch.cat([state, action], 1)))
        mean, std = self.mean(h), self.log_std(h).clamp(-4, 15).exp()
        z = mean + std * torch.randn_like(std)
        return self.decode(state, z), mean, std

    def decode(self, state, z=None):
        if z is None:
            z = torch.randn(state.shape[0], latent_dim).clamp(-0.5, 0.5)
        return max_action * torch.tanh(self.d2(F.relu(self.d1(torch.cat([state, z], 1)))))


actor, critic, vae = Actor(), Critic(), VAE()
actor_target, critic_target = copy.deepcopy(actor), copy.deepcopy(critic)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
vae_optimizer = torch.optim.Adam(vae.parameters(), lr=args.lr)
dataset = make_dataset(args.dataset_size)

for it in range(args.iterations):
    idx = torch.randint(0, args.dataset_size, (args.batch_size,))
    state, action, next_state, reward, not_done = (x[idx] for x in dataset)

    # the generative model of the batch's actions
    recon, mean, std = vae(state, action)
    recon_loss = F.mse_loss(recon, action)
    kl_loss = -0.5 * (1 + torch.log(std.pow(2)) - mean.pow(2) - std.pow(2)).mean()
    vae_loss = recon_loss + 0.5 * kl_loss
    vae_optimizer.zero_grad()
    vae_loss.backward()
    vae_optimizer.step()

    # the twin critics on the soft clipped double-Q target over ten sampled actions
    with torch.no_grad():
        next_rep = torch.repeat_interleave(next_state, 10, 0)
        target_q1, target_q2 = critic_target(next_rep, actor_target(next_rep, vae.decode(next_rep)))
        target_q = (args.lmbda * torch.min(target_q1, target_q2)
                    + (1 - args.lmbda) * torch.max(target_q1, target_q2))
        target_q = target_q.reshape(args.batch_size, -1).max(1)[0].reshape(-1, 1)
        target_q = reward + not_done * args.discount * target_q
    current_q1, current_q2 = critic(state, action)
    critic_loss = F.mse_loss(current_q1, target_q) + F.mse_loss(current_q2, target_q)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    # the perturbation model through Q1 on perturbed decoded actions
    sampled_actions = vae.decode(state)
    perturbed_actions = actor(state, sampled_actions)
    actor_loss = -critic.q1(state, perturbed_actions).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()

    with torch.no_grad():
        for net, target in ((critic, critic_target), (actor, actor_target)):
            for p, p_target in zip(net.parameters(), target.parameters()):
                p_target.copy_(args.tau * p + (1 - args.tau) * p_target)
    print(f"it {it} vae {vae_loss.item():.4f} critic {critic_loss.item():.4f} "
          f"actor {actor_loss.item():.4f}")

if args.out:
    torch.save({**{f"actor.{k}": v for k, v in actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in critic.state_dict().items()},
                **{f"vae.{k}": v for k, v in vae.state_dict().items()},
                **{f"actor_target.{k}": v for k, v in actor_target.state_dict().items()},
                **{f"critic_target.{k}": v for k, v in critic_target.state_dict().items()}},
               args.out)
