"""Actor-critic at a tiny size, written after pytorch/examples
reinforcement_learning/actor_critic.py (https://github.com/pytorch/examples/blob/
1c16b6c4b4e30902b4fcdbd4d77ed19c60e4b36d/reinforcement_learning/actor_critic.py): one network
with an action head and a value head, the advantage ``R - value.item()`` as a constant, the
critic trained by ``smooth_l1_loss(value, R)``. The environment (a point on a line, pushed left
or right, rewarded near the origin) lives in the script instead of gym. As published: clean."""

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
    """A point on a line: action 0 pushes it left, 1 right; reward 1 - |x|."""

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
        self.action_head = nn.Linear(32, 2)
        self.value_head = nn.Linear(32, 1)
        self.saved_actions, self.rewards = [], []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


model = Policy()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
eps = torch.finfo(torch.float32).eps


def select_action(state):
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append((m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    R, returns, policy_losses, value_losses = 0, [], [], []
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), R in zip(model.saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]


env = Line()
for i_episode in range(args.episodes):
    state = env.reset()
    for _t in range(args.horizon):
        action = select_action(state)
        state, reward = env.step(action)
        model.rewards.append(reward)
    finish_episode()
    print(f"Episode {i_episode}\tLast reward: {reward:.2f}")
