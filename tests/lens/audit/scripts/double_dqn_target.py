"""Double DQN at a tiny size, written after van Hasselt, Guez and Silver, "Deep Reinforcement
Learning with Double Q-learning" (AAAI 2016, arXiv:1509.06461) and Kaixhin/Rainbow (agent.py,
``Agent.learn``: under ``torch.no_grad()``, the online network picks the next action and the
target network evaluates it), with the Huber loss and the periodically synchronised target
network of the DQN tutorial of pytorch/tutorials (intermediate_source/reinforcement_q_learning.py,
``optimize_model``). The environment is a chain of five states, walked left or right, rewarded
at its right end; a replay buffer of transitions from a random policy is made in the script,
states one-hot with a little noise. Adam on the online network. Clean: the bootstrapped target,
made from cut outputs of both networks, is only the comparison target of the trained Q-values.
``--out PATH`` saves the online and the target weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--sync-every", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, size = 5, 2, 128
position = torch.randint(0, n_states, (size,))
action = torch.randint(0, n_actions, (size,))
next_position = (position + 2 * action - 1).clamp(0, n_states - 1)
reward = (next_position == n_states - 1).float()
done = reward.clone()


def observe(p):
    return F.one_hot(p, n_states).float() + 0.05 * torch.randn(len(p), n_states)


states, next_states = observe(position), observe(next_position)

online = nn.Sequential(nn.Linear(n_states, 16), nn.ReLU(), nn.Linear(16, n_actions))
target = nn.Sequential(nn.Linear(n_states, 16), nn.ReLU(), nn.Linear(16, n_actions))
target.load_state_dict(online.state_dict())
optimizer = torch.optim.Adam(online.parameters(), lr=0.01)

for step in range(args.steps):
    idx = torch.randint(0, size, (32,))
    q = online(states[idx]).gather(1, action[idx, None]).squeeze(1)
    with torch.no_grad():
        next_action = online(next_states[idx]).argmax(1, keepdim=True)
        next_q = target(next_states[idx]).gather(1, next_action).squeeze(1)
        expected = reward[idx] + args.gamma * (1 - done[idx]) * next_q
    loss = F.smooth_l1_loss(q, expected)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % args.sync_every == 0:
        target.load_state_dict(online.state_dict())
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"online.{k}": v for k, v in online.state_dict().items()},
                **{f"target.{k}": v for k, v in target.state_dict().items()}}, args.out)
