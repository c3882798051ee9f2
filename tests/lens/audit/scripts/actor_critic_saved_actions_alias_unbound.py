"""A one-step actor-critic with its episode's buffers on the model, at a tiny size, written after
pytorch/examples (reinforcement_learning/actor_critic.py): the ``Policy`` module has an action
head and a value head and holds two lists, ``saved_actions`` (a ``SavedAction`` namedtuple of
the action's ``log_prob`` and the state's value per step) and ``rewards``; at the episode's end
``finish_episode`` reads ``saved_actions = model.saved_actions``, computes the normalised
discounted returns, pairs them with the saved actions by ``zip`` for the policy's loss
(``-log_prob * advantage``, the advantage ``R - value.item()``) and the value's smooth L1 loss,
backpropagates their sum, steps Adam, and empties ``model.rewards`` and, through the name
``saved_actions``, ``model.saved_actions``. Here both heads are linear in the one-hot cell (the
published shared hidden layer left out), the backward keeping its graph
(``retain_graph=True``). The environment, in the script: a walk on 7 cells from the middle,
reward 1 at the right end and -1 at the left end, at most 10 steps. 12 episodes. ``--out PATH``
saves the model's state_dict."""

import argparse
from collections import namedtuple

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=12)
parser.add_argument("--cells", type=int, default=7)
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--lr", type=float, default=3e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)
eps = 1e-6

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class Walk:
    """Cells 0..cells-1, start in the middle; either end ends the episode."""

    def reset(self):
        self.cell, self.t = args.cells // 2, 0
        return self.cell

    def step(self, action):
        self.cell += 1 if action == 1 else -1
        self.t += 1
        reward = 1.0 if self.cell == args.cells - 1 else -1.0 if self.cell == 0 else 0.0
        return self.cell, reward, reward != 0.0 or self.t >= args.max_steps


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.action_head = nn.Linear(args.cells, 2)
        self.value_head = nn.Linear(args.cells, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=args.lr)
env = Walk()


def select_action(state):
    state = F.one_hot(torch.tensor(state), args.cells).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    R = 0.0
    saved_actions = model.saved_actions
    policy_losses = []
    value_losses = []
    returns = []
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), ret in zip(saved_actions, returns):
        advantage = ret - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, ret.view(1)))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward(retain_graph=True)
    optimizer.step()
    del model.rewards[:]
    del saved_actions


for i_episode in range(args.episodes):
    state, ep_reward = env.reset(), 0.0
    for _ in range(args.max_steps):
        action = select_action(state)
        state, reward, done = env.step(action)
        model.rewards.append(reward)
        ep_reward += reward
        if done:
            break
    print(f"episode {i_episode}: reward {ep_reward:.1f} length {len(model.rewards)}")
    finish_episode()

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
