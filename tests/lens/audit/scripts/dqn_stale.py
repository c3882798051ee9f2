"""DQN at a tiny size, written after cleanrl's single file cleanrl/dqn.py
(https://github.com/vwxyzjn/cleanrl/blob/cf8892acff7f4a5d26b69bfc2ce1f7b5fef981d5/cleanrl/dqn.py):
epsilon-greedy with a linear schedule, a replay buffer, the TD target under ``torch.no_grad()``
from a target network, ``optimizer.zero_grad(); loss.backward(); optimizer.step()``, and a soft
target update every few steps. The environment (a point on a line, two actions) lives in the
script instead of gym; arguments by argparse instead of tyro. Injected bug:
``optimizer.zero_grad()`` left out: each update adds the previous updates' gradients."""

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--total-timesteps", type=int, default=40)
parser.add_argument("--learning-rate", type=float, default=2.5e-4)
parser.add_argument("--buffer-size", type=int, default=1000)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=1.0)
parser.add_argument("--target-network-frequency", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--start-e", type=float, default=1.0)
parser.add_argument("--end-e", type=float, default=0.05)
parser.add_argument("--exploration-fraction", type=float, default=0.5)
parser.add_argument("--learning-starts", type=int, default=10)
parser.add_argument("--train-frequency", type=int, default=2)
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class LineEnv:
    """A point on a line: action 0 moves it left, 1 right; reward -|x|; 20 steps an episode."""

    def reset(self):
        self.x, self.t = float(np.random.uniform(-1, 1)), 0
        return np.array([self.x, 0.0], dtype=np.float32)

    def step(self, action):
        self.x += 0.1 if action == 1 else -0.1
        self.t += 1
        obs = np.array([self.x, self.t / 20], dtype=np.float32)
        return obs, -abs(self.x), self.t >= 20


class QNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                                     nn.Linear(32, 2))

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e, end_e, duration, t):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


env = LineEnv()
q_network = QNetwork()
optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate)
target_network = QNetwork()
target_network.load_state_dict(q_network.state_dict())
buffer = []

obs = env.reset()
for global_step in range(args.total_timesteps):
    epsilon = linear_schedule(args.start_e, args.end_e,
                              args.exploration_fraction * args.total_timesteps, global_step)
    if random.random() < epsilon:
        action = random.randrange(2)
    else:
        action = int(torch.argmax(q_network(torch.tensor(obs)), dim=0))
    next_obs, reward, done = env.step(action)
    buffer = ([*buffer, (obs, action, reward, next_obs, float(done))])[-args.buffer_size:]
    obs = env.reset() if done else next_obs

    if global_step > args.learning_starts and global_step % args.train_frequency == 0:
        batch = random.sample(buffer, args.batch_size)
        b_obs, b_act, b_rew, b_next, b_done = (torch.tensor(np.array(x)) for x in zip(*batch))
        with torch.no_grad():
            target_max, _ = target_network(b_next).max(dim=1)
            td_target = b_rew.float() + args.gamma * target_max * (1 - b_done.float())
        old_val = q_network(b_obs).gather(1, b_act[:, None]).squeeze()
        loss = F.mse_loss(td_target, old_val)
        loss.backward()
        optimizer.step()
        print(f"step {global_step} td_loss {loss.item():.4f}")

    if global_step % args.target_network_frequency == 0:
        for target_network_param, q_network_param in zip(target_network.parameters(),
                                                         q_network.parameters()):
            target_network_param.data.copy_(
                args.tau * q_network_param.data + (1.0 - args.tau) * target_network_param.data)
