"""Soft actor-critic at a tiny size, written after Haarnoja et al., "Soft Actor-Critic
Algorithms and Applications" (arXiv:1812.05905) and the layout of stable-baselines3's SAC
(stable_baselines3/sac/sac.py and sac/policies.py, https://github.com/DLR-RM/stable-baselines3):
an agent object whose policy module holds the actor, the twin critics and their target copy;
the agent names them as attributes (``self.critic``, ``self.critic_target``); the TD target is
computed under ``torch.no_grad()`` from the target critics at the actor's next action, the
entropy coefficient is learned through its log, and the target copy follows the critic by a
Polyak update after each gradient step. The environment (a point on a line pulled toward the
origin, reward ``-x**2``) lives in the script instead of gym."""

import argparse
import copy
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=5)
parser.add_argument("--total-timesteps", type=int, default=36)
parser.add_argument("--learning-starts", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--tau", type=float, default=0.05)
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class LineEnv:
    """A point at x moved by a bounded action; reward -x**2; 8 steps an episode."""

    def reset(self):
        self.x, self.t = float(np.random.uniform(-1.5, 1.5)), 0
        return np.array([self.x, 1.0], dtype=np.float32)

    def step(self, action):
        self.x += 0.25 * float(np.clip(action, -1, 1))
        self.t += 1
        return np.array([self.x, 1.0 - self.t / 8], dtype=np.float32), -self.x ** 2, self.t >= 8


class TwinCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_networks = nn.ModuleList(
            nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1)) for _ in range(2))

    def forward(self, obs, action):
        x = torch.cat([obs, action], 1)
        return tuple(q(x) for q in self.q_networks)


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 16), nn.ReLU())
        self.mu, self.log_std = nn.Linear(16, 1), nn.Linear(16, 1)

    def action_log_prob(self, obs):
        h = self.body(obs)
        mu, log_std = self.mu(h), self.log_std(h).clamp(-5, 2)
        dist = torch.distributions.Normal(mu, log_std.exp())
        u = dist.rsample()
        action = torch.tanh(u)
        log_prob = (dist.log_prob(u) - torch.log(1 - action.pow(2) + 1e-6)).sum(1)
        return action, log_prob


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = Actor()
        self.critic = TwinCritic()
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_target.requires_grad_(False)


class SAC:
    def __init__(self, lr=1e-3):
        self.policy = Policy()
        self.actor, self.critic = self.policy.actor, self.policy.critic
        self.critic_target = self.policy.critic_target
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.log_ent_coef = torch.zeros(1, requires_grad=True)
        self.ent_coef_optimizer = torch.optim.Adam([self.log_ent_coef], lr=lr)
        self.target_entropy = -1.0

    def polyak_update(self, tau):
        with torch.no_grad():
            for p, tp in zip(self.critic.parameters(), self.critic_target.parameters()):
                tp.mul_(1 - tau).add_(p, alpha=tau)

    def train(self, obs, actions, rewards, next_obs, dones, gamma, tau):
        actions_pi, log_prob = self.actor.action_log_prob(obs)
        ent_coef = self.log_ent_coef.detach().exp()
        ent_coef_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
        self.ent_coef_optimizer.zero_grad()
        ent_coef_loss.backward()
        self.ent_coef_optimizer.step()

        with torch.no_grad():
            next_actions, next_log_prob = self.actor.action_log_prob(next_obs)
            next_q = torch.cat(self.critic_target(next_obs, next_actions), dim=1)
            next_q = next_q.min(dim=1, keepdim=True).values - ent_coef * next_log_prob[:, None]
            target_q = rewards[:, None] + (1 - dones[:, None]) * gamma * next_q
        current_q = self.critic(obs, actions)
        critic_loss = 0.5 * sum(F.mse_loss(q, target_q) for q in current_q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        q_pi = torch.cat(self.critic(obs, actions_pi), dim=1).min(dim=1, keepdim=True).values
        actor_loss = (ent_coef * log_prob[:, None] - q_pi).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        self.polyak_update(tau)
        return critic_loss.item()


env, model, buffer = LineEnv(), SAC(), []
obs = env.reset()
for step in range(args.total_timesteps):
    with torch.no_grad():
        action, _ = model.actor.action_log_prob(torch.tensor(obs)[None])
    next_obs, reward, done = env.step(action.numpy()[0, 0])
    buffer.append((obs, action.numpy()[0], np.float32(reward), next_obs, np.float32(done)))
    obs = env.reset() if done else next_obs
    if step >= args.learning_starts:
        batch = [torch.tensor(np.array(x)) for x in zip(*random.sample(buffer, args.batch_size))]
        loss = model.train(*batch, gamma=args.gamma, tau=args.tau)
        print(f"step {step} critic_loss {loss:.4f}")
