"""REINFORCE at a tiny size, written after pytorch/examples reinforcement_learning/reinforce.py
(https://github.com/pytorch/examples/blob/2f5815e164db37800dbfac93fc3783233f7bef6b/
reinforcement_learning/reinforce.py): an episode's log-probabilities weighted by its normalised
returns, ``optimizer.zero_grad()`` then ``backward()`` then ``step()``. The environment (a point
on a line) lives in the script instead of gym. Injected bug:
``optimizer.zero_grad()`` written between ``backward()`` and ``step()``: the step gets no gradient."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--seed", type=int, default=543)
parser.add_argument("--episodes", type=int, default=5)
parser.add_argument("--horizon", type=int, default=10)
args = parser.parse_args()
torch.manual_seed(args.seed)


class Line:
    def reset(self):
        self.x = torch.rand(()).item() * 2 - 1
        return torch.tensor([self.x, 0.0])

    def step(self, action):
        self.x += 0.1 if action == 1 else -0.1
        return torch.tensor([self.x, 1.0]), 1.0 - abs(self.x)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(2, 32)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(32, 2)
        self.saved_log_probs, self.rewards = [], []

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=-1)


policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
eps = torch.finfo(torch.float32).eps


def select_action(state):
    m = Categorical(policy(state))
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R, policy_loss, returns = 0, [], []
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    policy_loss = torch.stack(policy_loss).sum()
    policy_loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]


env = Line()
for i_episode in range(args.episodes):
    state = env.reset()
    for _t in range(args.horizon):
        action = select_action(state)
        state, reward = env.step(action)
        policy.rewards.append(reward)
    finish_episode()
    print(f"Episode {i_episode}\tLast reward: {reward:.2f}")
