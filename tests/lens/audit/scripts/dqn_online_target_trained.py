"""Deep Q-learning with the online network as its own bootstrap, at a tiny size, written after
Mnih et al., "Playing Atari with Deep Reinforcement Learning" (NIPS Deep Learning Workshop 2013,
arXiv:1312.5602, Algorithm 1 and eqs. 2-3: the target ``y = r + gamma max_a' Q(s', a'; theta)``
is made by the same network that is trained, with its parameters held fixed while the loss is
differentiated; this version has no separate target network) and the step of cleanrl's
single-file DQN (vwxyzjn/cleanrl, cleanrl/dqn.py: the TD target made without gradient, then
``F.mse_loss(td_target, old_val)``). The prediction ``Q(s, a)`` and the bootstrap
``max_a' Q(s', a')`` are both made by the one Q-network, on different inputs (the state and
the next state), and the target adds the reward to the discounted maximum: it is a regression
target, not a mirror of the prediction. Epsilon-greedy acting, a replay buffer, one update per
environment step once the buffer holds ``--learning-starts`` transitions. The environment, a
corridor of seven cells with a reward at its right end, lives in the script (states one-hot).
The bug: the bootstrap is read from the network's output without the cut, so the TD loss also
moves ``Q(s', .)`` toward the prediction. ``--out PATH`` saves the Q-network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--total-timesteps", type=int, default=40)
parser.add_argument("--learning-starts", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--epsilon", type=float, default=0.3)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

cells = 7


class Corridor:
    """Cells 0..6, start in the middle; action 0 moves left, 1 right; reward 1 on reaching the
    right end; an episode ends at either end or after 12 moves."""

    def reset(self):
        self.cell, self.t = cells // 2, 0
        return F.one_hot(torch.tensor(self.cell), cells).float()

    def step(self, action):
        self.cell += 1 if action == 1 else -1
        self.t += 1
        reward = 1.0 if self.cell == cells - 1 else 0.0
        done = self.cell in (0, cells - 1) or self.t >= 12
        return F.one_hot(torch.tensor(self.cell), cells).float(), reward, done


q_network = nn.Sequential(nn.Linear(cells, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.Adam(q_network.parameters(), lr=args.lr)
env = Corridor()
buffer = []

obs = env.reset()
for global_step in range(args.total_timesteps):
    if torch.rand(()) < args.epsilon:
        action = int(torch.randint(0, 2, ()))
    else:
        with torch.no_grad():
            action = int(q_network(obs).argmax())
    next_obs, reward, done = env.step(action)
    buffer.append((obs, action, reward, next_obs, float(done)))
    obs = env.reset() if done else next_obs

    if len(buffer) >= args.learning_starts:
        picked = torch.randint(0, len(buffer), (args.batch_size,)).tolist()
        b_obs, b_act, b_rew, b_next, b_done = zip(*(buffer[i] for i in picked))
        b_obs, b_next = torch.stack(b_obs), torch.stack(b_next)
        b_act, b_rew, b_done = torch.tensor(b_act), torch.tensor(b_rew), torch.tensor(b_done)
        td_target = b_rew + args.gamma * q_network(b_next).max(dim=1).values * (1 - b_done)
        old_val = q_network(b_obs).gather(1, b_act[:, None]).squeeze(1)
        loss = F.mse_loss(td_target, old_val)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {global_step} td_loss {loss.item():.4f}")

if args.out:
    torch.save(q_network.state_dict(), args.out)
