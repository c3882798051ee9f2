"""Soft actor-critic at a tiny size, written after cleanrl's single file
cleanrl/sac_continuous_action.py (https://github.com/vwxyzjn/cleanrl/blob/
2f4172eef96118b4d9d7111e1ecab1859a4b257c/cleanrl/sac_continuous_action.py): two soft Q networks
with targets, one optimizer for both critics, a squashed Gaussian actor updated every
``policy_frequency`` steps through ``min(Q1, Q2)``, each optimizer cleared before its own
backward. The entropy coefficient is fixed (``--autotune`` off); the environment (a point
pushed by a continuous action) lives in the script instead of gym; arguments by argparse
instead of tyro. As published: clean."""

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--total-timesteps", type=int, default=30)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=0.005)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--learning-starts", type=int, default=10)
parser.add_argument("--policy-lr", type=float, default=3e-4)
parser.add_argument("--q-lr", type=float, default=1e-3)
parser.add_argument("--policy-frequency", type=int, default=2)
parser.add_argument("--target-network-frequency", type=int, default=1)
parser.add_argument("--alpha", type=float, default=0.2)
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)
LOG_STD_MAX, LOG_STD_MIN = 2, -5


class PushEnv:
    """A point pushed by an action in [-1, 1]; reward -|x|; 15 steps an episode."""

    def reset(self):
        self.x, self.t = float(np.random.uniform(-1, 1)), 0
        return np.array([self.x, 0.0, 1.0], dtype=np.float32)

    def step(self, a):
        self.x += 0.1 * float(a[0])
        self.t += 1
        return np.array([self.x, self.t / 15, 1.0], dtype=np.float32), -abs(self.x), \
            self.t >= 15


class SoftQNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 32), nn.Linear(32, 32), nn.Linear(32, 1)

    def forward(self, x, a):
        x = F.relu(self.fc1(torch.cat([x, a], 1)))
        return self.fc3(F.relu(self.fc2(x)))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 32), nn.Linear(32, 32)
        self.fc_mean, self.fc_logstd = nn.Linear(32, 1), nn.Linear(32, 1)

    def forward(self, x):
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        log_std = torch.tanh(self.fc_logstd(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        return self.fc_mean(x), log_std

    def get_action(self, x):
        mean, log_std = self(x)
        normal = torch.distributions.Normal(mean, log_std.exp())
        x_t = normal.rsample()
        action = torch.tanh(x_t)
        log_prob = normal.log_prob(x_t) - torch.log(1 - action.pow(2) + 1e-6)
        return action, log_prob.sum(1, keepdim=True), torch.tanh(mean)


env = PushEnv()
actor, qf1, qf2 = Actor(), SoftQNetwork(), SoftQNetwork()
qf1_target, qf2_target = SoftQNetwork(), SoftQNetwork()
qf1_target.load_state_dict(qf1.state_dict())
qf2_target.load_state_dict(qf2.state_dict())
q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=args.q_lr)
actor_optimizer = torch.optim.Adam(list(actor.parameters()), lr=args.policy_lr)
alpha = args.alpha
buffer = []

obs = env.reset()
for global_step in range(args.total_timesteps):
    if global_step < args.learning_starts:
        action = np.random.uniform(-1, 1, size=1).astype(np.float32)
    else:
        action, _, _ = actor.get_action(torch.tensor(obs)[None])
        action = action.detach().numpy()[0]
    next_obs, reward, done = env.step(action)
    buffer.append((obs, action, reward, next_obs, float(done)))
    obs = env.reset() if done else next_obs

    if global_step > args.learning_starts:
        batch = random.sample(buffer, args.batch_size)
        b_obs, b_act, b_rew, b_next, b_done = (torch.tensor(np.array(x)) for x in zip(*batch))
        with torch.no_grad():
            next_state_actions, next_state_log_pi, _ = actor.get_action(b_next)
            min_qf_next_target = torch.min(qf1_target(b_next, next_state_actions),
                                           qf2_target(b_next, next_state_actions))
            min_qf_next_target = min_qf_next_target - alpha * next_state_log_pi
            next_q_value = b_rew.float() + (1 - b_done.float()) * args.gamma * \
                min_qf_next_target.view(-1)
        qf1_a_values = qf1(b_obs, b_act).view(-1)
        qf2_a_values = qf2(b_obs, b_act).view(-1)
        qf_loss = F.mse_loss(qf1_a_values, next_q_value) + F.mse_loss(qf2_a_values, next_q_value)
        q_optimizer.zero_grad()
        qf_loss.backward()
        q_optimizer.step()

        if global_step % args.policy_frequency == 0:
            for _ in range(args.policy_frequency):
                pi, log_pi, _ = actor.get_action(b_obs)
                min_qf_pi = torch.min(qf1(b_obs, pi), qf2(b_obs, pi))
                actor_loss = ((alpha * log_pi) - min_qf_pi).mean()
                actor_optimizer.zero_grad()
                actor_loss.backward()
                actor_optimizer.step()

        if global_step % args.target_network_frequency == 0:
            for param, target_param in zip(qf1.parameters(), qf1_target.parameters()):
                target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
            for param, target_param in zip(qf2.parameters(), qf2_target.parameters()):
                target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
        print(f"step {global_step} qf_loss {qf_loss.item():.4f}")
