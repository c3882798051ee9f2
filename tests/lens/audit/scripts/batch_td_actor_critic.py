"""A one-step actor-critic over a batch of transitions at a tiny size, written after Sutton and
Barto, "Reinforcement Learning: An Introduction" (2nd ed., 2018, Section 13.5, one-step
actor-critic) and pytorch/examples reinforcement_learning/actor_critic.py
(https://github.com/pytorch/examples/blob/main/reinforcement_learning/actor_critic.py): one
network with a policy head (a Gaussian's mean) and a value head. Each update runs one rollout
without gradients, then one forward over all its states ``s_0 .. s_T``: ``values[:-1]`` are
the predictions, ``values[1:]`` bootstrap the TD targets ``r + gamma * V(s') * mask`` (cut:
``.detach()``), the critic is trained by ``mse_loss(values[:-1], td_target)`` and the actor on
the TD error as a constant. The environment (a point pushed along a line, rewarded near the
origin) lives in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal

parser = argparse.ArgumentParser()
parser.add_argument("--updates", type=int, default=6)
parser.add_argument("--horizon", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.95)
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
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
std = 0.5
for update in range(args.updates):
    state = env.reset()
    states, actions, rewards, masks = [state], [], [], []
    with torch.no_grad():
        for _ in range(args.horizon):
            mu, _ = model(state)
            action = Normal(mu, std).sample()
            state, reward, done = env.step(action)
            states.append(state)
            actions.append(action)
            rewards.append(reward)
            masks.append(0.0 if done else 1.0)
            if done:
                break
    mu, values = model(torch.stack(states))
    values = values.squeeze(-1)
    rewards, masks = torch.tensor(rewards), torch.tensor(masks)
    td_target = rewards + args.gamma * values[1:].detach() * masks
    critic_loss = F.mse_loss(values[:-1], td_target)
    advantage = (td_target - values[:-1]).detach()
    log_prob = Normal(mu[:-1], std).log_prob(torch.stack(actions)).squeeze(-1)
    actor_loss = -(log_prob * advantage).mean()
    loss = actor_loss + 0.5 * critic_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"update {update} critic {critic_loss.item():.4f} actor {actor_loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
