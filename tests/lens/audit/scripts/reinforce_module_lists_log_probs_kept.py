"""REINFORCE with the episode's buffers kept on the policy module, at a tiny size, written after
pytorch/examples (reinforcement_learning/reinforce.py; Williams, "Simple statistical
gradient-following algorithms for connectionist reinforcement learning", Machine Learning 8,
1992): the ``Policy`` module holds two lists, ``saved_log_probs`` and ``rewards``;
``select_action`` appends the ``log_prob`` of each sampled action to ``policy.saved_log_probs``
and the loop appends each reward to ``policy.rewards``; at the episode's end ``finish_episode``
computes the discounted returns, normalises them, pairs them with the saved log-probabilities
by ``zip``, backpropagates the summed loss, steps Adam and empties both lists with ``del``. The
policy here is one linear layer over the one-hot cell (the published hidden layer and dropout
left out), its backward keeping its graph (``retain_graph=True``). The environment, in the
script: a chain of 6 cells, start at the left end, action 1 moves right and 0 left, reward 1 at
the right end and -0.1 a step, at most 12 steps. 12 episodes. ``--out PATH`` saves the policy's
state_dict."""

import argparse
from collections import deque

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=12)
parser.add_argument("--cells", type=int, default=6)
parser.add_argument("--max-steps", type=int, default=12)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)
eps = 1e-6


class Chain:
    """Cells 0..cells-1, start at 0; the right end ends the episode with reward 1."""

    def reset(self):
        self.cell, self.t = 0, 0
        return self.cell

    def step(self, action):
        self.cell = max(0, self.cell + (1 if action == 1 else -1))
        self.t += 1
        at_end = self.cell == args.cells - 1
        return self.cell, (1.0 if at_end else -0.1), at_end or self.t >= args.max_steps


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine = nn.Linear(args.cells, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        return F.softmax(self.affine(x), dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=args.lr)
env = Chain()


def select_action(state):
    state = F.one_hot(torch.tensor([state]), args.cells).float()
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0.0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, ret in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * ret)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward(retain_graph=True)
    optimizer.step()
    del policy.rewards[:]


running_reward = 0.0
for i_episode in range(args.episodes):
    state, ep_reward = env.reset(), 0.0
    for _ in range(args.max_steps):
        action = select_action(state)
        state, reward, done = env.step(action)
        policy.rewards.append(reward)
        ep_reward += reward
        if done:
            break
    running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
    finish_episode()
    print(f"episode {i_episode}: reward {ep_reward:.2f} running {running_reward:.2f}")

if args.out:
    torch.save({"policy": policy.state_dict()}, args.out)
