"""An advantage actor-critic with GAE at a tiny size, written after Mnih et al., "Asynchronous
Methods for Deep Reinforcement Learning" (arXiv:1602.01783), Schulman et al., "High-Dimensional
Continuous Control Using Generalized Advantage Estimation" (arXiv:1506.02438) and the worker loop
of ikostrikov/pytorch-a3c (https://github.com/ikostrikov/pytorch-a3c/blob/master/train.py), run as
one synchronous worker: rollouts of ``--num-steps`` steps kept on the graph, the return
bootstrapped from ``value.detach()`` when the rollout did not end the episode, the value loss on
n-step returns, the policy loss on ``gae.detach()`` with an entropy bonus, ``clip_grad_norm_`` and
Adam. One shared trunk with an actor and a critic head. The environment (a walk on six cells,
reward at the right end, a small cost per step) lives in the script. Injected bug: the bootstrap
of an unfinished rollout is ``R = value`` without ``.detach()``, so the critic's n-step targets
carry its own gradient into the value loss."""

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--updates", type=int, default=30)
parser.add_argument("--num-steps", type=int, default=5)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--gae-lambda", type=float, default=1.0)
parser.add_argument("--entropy-coef", type=float, default=0.01)
parser.add_argument("--value-loss-coef", type=float, default=0.5)
parser.add_argument("--max-grad-norm", type=float, default=50)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class Walk:
    def reset(self):
        self.pos, self.t = 0, 0
        return torch.from_numpy(np.eye(6, dtype=np.float32)[self.pos])

    def step(self, action):
        self.pos = min(5, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        self.t += 1
        done = self.pos == 5 or self.t >= 20
        reward = 1.0 if self.pos == 5 else -0.01
        return torch.from_numpy(np.eye(6, dtype=np.float32)[self.pos]), reward, done


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(6, 32), nn.ELU())
        self.critic_linear = nn.Linear(32, 1)
        self.actor_linear = nn.Linear(32, 2)

    def forward(self, x):
        x = self.trunk(x)
        return self.critic_linear(x), self.actor_linear(x)


env = Walk()
model = ActorCritic()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
state, done = env.reset(), True
for update in range(args.updates):
    values, log_probs, rewards, entropies = [], [], [], []
    for _step in range(args.num_steps):
        value, logit = model(state[None])
        prob = F.softmax(logit, dim=-1)
        log_prob = F.log_softmax(logit, dim=-1)
        entropy = -(log_prob * prob).sum(1, keepdim=True)
        action = prob.multinomial(num_samples=1).detach()
        log_prob = log_prob.gather(1, action)
        state, reward, done = env.step(action.item())
        if done:
            state = env.reset()
        values.append(value)
        log_probs.append(log_prob)
        rewards.append(reward)
        entropies.append(entropy)
        if done:
            break

    R = torch.zeros(1, 1)
    if not done:
        value, _ = model(state[None])
        R = value
    values.append(R)
    policy_loss = 0
    value_loss = 0
    gae = torch.zeros(1, 1)
    for i in reversed(range(len(rewards))):
        R = args.gamma * R + rewards[i]
        advantage = R - values[i]
        value_loss = value_loss + 0.5 * advantage.pow(2)
        delta_t = rewards[i] + args.gamma * values[i + 1] - values[i]
        gae = gae * args.gamma * args.gae_lambda + delta_t
        policy_loss = policy_loss - log_probs[i] * gae.detach() - args.entropy_coef * entropies[i]

    optimizer.zero_grad()
    (policy_loss + args.value_loss_coef * value_loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
    optimizer.step()
    if update % 10 == 0:
        print(f"update {update} policy loss {policy_loss.item():.4f} "
              f"value loss {value_loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
