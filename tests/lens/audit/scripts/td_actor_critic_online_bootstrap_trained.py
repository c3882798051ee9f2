"""An online one-step actor-critic at a tiny size, written after Sutton and Barto,
"Reinforcement Learning: An Introduction" (2nd ed., 2018, Section 13.5, the one-step
actor-critic's pseudocode, updating at every step) and pytorch/examples
reinforcement_learning/actor_critic.py
(https://github.com/pytorch/examples/blob/main/reinforcement_learning/actor_critic.py): one
network returning a Gaussian policy's mean and a state value, ``mu, value = model(state)``;
after each action the next state's value ``_, next_value = model(next_state)`` bootstraps the
TD target ``r + gamma * next_value.detach() * (1 - done)``, the TD error trains the critic
(squared) and weights the actor's log-probability (as a constant). The environment (a point
pushed along a line, rewarded near the origin) lives in the script. Bug: ``next_value`` is not
detached, so the critic is also trained through its own bootstrapped target."""

import argparse

import torch
from torch import nn
from torch.distributions import Normal

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)


class Point:
    """A point on a line pushed by the action; reward ``-x**2``, done past ``|x| > 2``."""

    def reset(self):
        self.x = float(torch.rand(()) * 2 - 1)
        return torch.tensor([self.x, 1.0])

    def step(self, action):
        self.x += 0.3 * float(action.clamp(-1, 1))
        done = abs(self.x) > 2
        return torch.tensor([self.x, 1.0]), -self.x ** 2, done


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(2, 32)
        self.mu_head = nn.Linear(32, 1)
        self.value_head = nn.Linear(32, 1)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.mu_head(h), self.value_head(h)


env = Point()
model = ActorCritic()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
std = 0.5
state = env.reset()
for step in range(args.steps):
    mu, value = model(state)
    dist = Normal(mu, std)
    action = dist.sample()
    next_state, reward, done = env.step(action)
    _, next_value = model(next_state)
    td_target = reward + args.gamma * next_value * (1.0 - float(done))
    delta = td_target - value
    loss = delta.pow(2).sum() - (dist.log_prob(action) * delta.detach()).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    state = env.reset() if done else next_state
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
