"""REINFORCE with a learned baseline, a policy and a baseline with an optimizer each, at a tiny
size, written after Sutton and Barto, "Reinforcement Learning: An Introduction" (2nd ed., 2018,
section 13.4, "REINFORCE with Baseline": the state-value baseline and the policy each with its
own step size) and pytorch/examples (reinforcement_learning/reinforce.py: during an episode the
policy's ``log_prob`` of each sampled action is appended to ``saved_log_probs`` and each reward
to ``rewards``; at the episode's end ``finish_episode`` computes the discounted returns, pairs
them with the saved log-probabilities by ``zip``, backpropagates the summed loss, steps, and
empties the episode's lists with ``del``). Here the baseline's values are saved with the
log-probabilities; at the episode's end the baseline's squared error comes first and the
baseline steps, then the policy's loss, ``-log_prob * (G - v.detach())``, reads the
log-probabilities made during the episode, before the baseline's step. The policy accumulates
over ``--accum`` episodes (2 at the defaults) and steps under ``if (i + 1) % accum == 0:``;
``zero_grad()`` follows each step. The policy's backward keeps its graph
(``retain_graph=True``). Both are tables (``nn.Embedding``): action preferences under a
softmax, and state values. The environment, in the script: a corridor of 5 cells, start at the
left end, reward -1 a step until the right end or 10 steps. 16 episodes. ``--out PATH`` saves
both tables' state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=16)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--cells", type=int, default=5)
parser.add_argument("--max-steps", type=int, default=10)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--policy-lr", type=float, default=0.1)
parser.add_argument("--baseline-lr", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)


class Corridor:
    """Cells 0..cells-1; action 1 moves right, 0 moves left (the wall stops it); -1 a step."""

    def reset(self):
        self.cell, self.t = 0, 0
        return self.cell

    def step(self, action):
        self.cell = max(0, self.cell + (1 if action == 1 else -1))
        self.t += 1
        done = self.cell == args.cells - 1 or self.t >= args.max_steps
        return self.cell, -1.0, done


policy = nn.Embedding(args.cells, 2)
baseline = nn.Embedding(args.cells, 1)
policy_optimizer = torch.optim.SGD(policy.parameters(), lr=args.policy_lr)
baseline_optimizer = torch.optim.SGD(baseline.parameters(), lr=args.baseline_lr)
saved_log_probs, saved_values, rewards = [], [], []
env = Corridor()

for i in range(args.episodes):
    state = env.reset()
    done = False
    while not done:
        cell = torch.tensor([state])
        m = Categorical(logits=policy(cell))
        action = m.sample()
        saved_log_probs.append(m.log_prob(action))
        saved_values.append(baseline(cell).view(1))
        state, reward, done = env.step(int(action))
        rewards.append(reward)

    R, returns = 0.0, []
    for r in rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    values = torch.cat(saved_values)

    # the baseline: squared error to the returns
    baseline_loss = F.mse_loss(values, returns, reduction="sum")
    baseline_loss.backward()
    baseline_optimizer.step()
    baseline_optimizer.zero_grad()

    # the policy: REINFORCE with the baseline
    advantages = returns - values.detach()
    policy_loss = []
    for log_prob, advantage in zip(saved_log_probs, advantages):
        policy_loss.append(-log_prob * advantage)
    (torch.cat(policy_loss).sum() / args.accum).backward(retain_graph=True)
    if (i + 1) % args.accum == 0:
        policy_optimizer.step()
        policy_optimizer.zero_grad()
    print(f"episode {i}: length {len(rewards)} baseline loss {baseline_loss.item():.4f}")
    del saved_log_probs[:], saved_values[:], rewards[:]

if args.out:
    torch.save({"policy": policy.state_dict(), "baseline": baseline.state_dict()}, args.out)
