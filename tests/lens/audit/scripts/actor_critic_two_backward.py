"""Actor-critic (REINFORCE with a learned baseline) at a tiny size, written after pytorch/examples
reinforcement_learning/actor_critic.py
(https://github.com/pytorch/examples/blob/2f5815e164db37800dbfac93fc3783233f7bef6b/reinforcement_learning/actor_critic.py),
with the policy's and the value's losses given to two ``backward()`` calls (the first keeps the
shared body's graph) instead of their sum to one, then ``optimizer.step()`` and
``optimizer.zero_grad()`` after it: both gradients are summed in ``.grad`` before the step. The
environment (a point on a line) lives in the script. Clean: nothing is cleared before the step
(must not be flagged as a lost gradient)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--seed", type=int, default=543)
parser.add_argument("--episodes", type=int, default=4)
parser.add_argument("--horizon", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
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
        self.action_head = nn.Linear(32, 2)
        self.value_head = nn.Linear(32, 1)

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


model = Policy()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
eps = torch.finfo(torch.float32).eps
env = Line()
for i_episode in range(args.episodes):
    state, saved, rewards = env.reset(), [], []
    for _t in range(args.horizon):
        probs, value = model(state)
        m = Categorical(probs)
        action = m.sample()
        saved.append((m.log_prob(action), value))
        state, reward = env.step(action.item())
        rewards.append(reward)
    R, returns = 0, []
    for r in rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    policy_losses, value_losses = [], []
    for (log_prob, value), R in zip(saved, returns):
        policy_losses.append(-log_prob * (R - value.item()))
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    torch.stack(policy_losses).sum().backward(retain_graph=True)
    torch.stack(value_losses).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"Episode {i_episode}\tLast reward: {reward:.2f}")

if args.out:
    torch.save(model.state_dict(), args.out)
