"""TD3 at a tiny size, written after Fujimoto et al., "Addressing Function Approximation Error in
Actor-Critic Methods" (arXiv:1802.09477) and cleanrl's single file
cleanrl/td3_continuous_action.py (https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/
td3_continuous_action.py): twin critics, each with a target critic, the TD target the minimum
of the two target critics at the target actor's action smoothed by clipped noise, computed
under ``torch.no_grad()``; the actor trained through the first critic every
``policy_frequency`` steps, then a Polyak (soft) update of the three targets. The
environment (a point on a line pulled toward the origin, reward ``-x**2``) lives in the script
instead of gym. Bug: the second critic's next value is read from the online ``qf2`` instead of
``qf2_target``; ``qf2_target`` is soft-updated with the others and never read."""

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=3)
parser.add_argument("--total-timesteps", type=int, default=40)
parser.add_argument("--learning-rate", type=float, default=1e-3)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--tau", type=float, default=0.1)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--policy-noise", type=float, default=0.2)
parser.add_argument("--noise-clip", type=float, default=0.5)
parser.add_argument("--exploration-noise", type=float, default=0.1)
parser.add_argument("--learning-starts", type=int, default=12)
parser.add_argument("--policy-frequency", type=int, default=2)
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class PullEnv:
    """A point at x moved by a bounded action; reward -x**2; 10 steps an episode."""

    def reset(self):
        self.x, self.t = float(np.random.uniform(-2, 2)), 0
        return np.array([self.x, 1.0], dtype=np.float32)

    def step(self, action):
        self.x += 0.3 * float(np.clip(action, -1, 1))
        self.t += 1
        return np.array([self.x, 1.0 - self.t / 10], dtype=np.float32), -self.x ** 2, self.t >= 10


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 24), nn.ReLU(), nn.Linear(24, 1))

    def forward(self, s, a):
        return self.net(torch.cat([s, a], 1))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 24), nn.ReLU(), nn.Linear(24, 1))

    def forward(self, s):
        return torch.tanh(self.net(s))


def soft_update(online, target, tau):
    for p, tp in zip(online.parameters(), target.parameters()):
        tp.data.copy_(tau * p.data + (1 - tau) * tp.data)


env = PullEnv()
actor, qf1, qf2 = Actor(), Critic(), Critic()
target_actor, qf1_target, qf2_target = Actor(), Critic(), Critic()
target_actor.load_state_dict(actor.state_dict())
qf1_target.load_state_dict(qf1.state_dict())
qf2_target.load_state_dict(qf2.state_dict())
q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()),
                               lr=args.learning_rate)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.learning_rate)
buffer = []

obs = env.reset()
for global_step in range(args.total_timesteps):
    with torch.no_grad():
        action = actor(torch.tensor(obs)[None])[0]
        action = (action + args.exploration_noise * torch.randn_like(action)).clamp(-1, 1)
    next_obs, reward, done = env.step(action.numpy()[0])
    buffer.append((obs, action.numpy(), np.float32(reward), next_obs, np.float32(done)))
    obs = env.reset() if done else next_obs

    if global_step > args.learning_starts:
        batch = random.sample(buffer, args.batch_size)
        b_obs, b_act, b_rew, b_next, b_done = (torch.tensor(np.array(x)) for x in zip(*batch))
        with torch.no_grad():
            noise = (torch.randn_like(b_act) * args.policy_noise).clamp(-args.noise_clip,
                                                                        args.noise_clip)
            next_actions = (target_actor(b_next) + noise).clamp(-1, 1)
            q1_next = qf1_target(b_next, next_actions)
            q2_next = qf2(b_next, next_actions)
            min_q_next = torch.min(q1_next, q2_next).view(-1)
            next_q_value = b_rew + (1 - b_done) * args.gamma * min_q_next
        q1_values = qf1(b_obs, b_act).view(-1)
        q2_values = qf2(b_obs, b_act).view(-1)
        qf_loss = F.mse_loss(q1_values, next_q_value) + F.mse_loss(q2_values, next_q_value)
        q_optimizer.zero_grad()
        qf_loss.backward()
        q_optimizer.step()

        if global_step % args.policy_frequency == 0:
            actor_loss = -qf1(b_obs, actor(b_obs)).mean()
            actor_optimizer.zero_grad()
            actor_loss.backward()
            actor_optimizer.step()
            soft_update(actor, target_actor, args.tau)
            soft_update(qf1, qf1_target, args.tau)
            soft_update(qf2, qf2_target, args.tau)
        print(f"step {global_step} qf_loss {qf_loss.item():.4f}")
