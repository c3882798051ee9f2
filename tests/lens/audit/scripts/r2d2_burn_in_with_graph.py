"""A recurrent Q-learner trained on replayed sequences with a burn-in, at a tiny size, written
after Kapturowski, Ostrovski, Quan, Munos and Dabney, "Recurrent Experience Replay in
Distributed Reinforcement Learning" (R2D2, ICLR 2019, no arXiv version), and the burn-in of a
public PyTorch implementation, pytorch/rl, torchrl/envs/transforms/transforms.py,
BurnInTransform.forward, which runs the recurrent module over the first steps of a sampled
sequence under ``torch.no_grad()`` and hands on only the recurrent state it reached. Each
replayed sequence starts from the recurrent state the actor stored; the first ``--burn-in``
steps only refresh that state (a loop whose body is the first line of the training unroll's),
and the Q-values of the remaining steps are trained by one-step TD targets from a target
network synced every few iterations. As published, the burn-in loop runs under
``torch.no_grad()``: the loss backpropagates through the training unroll alone. The bug twin
guards the burn-in with ``if args.burn_in > 0:`` instead, so the loss also backpropagates
through every burn-in step: the fix is that line (``with torch.no_grad():``); detaching the
state where the burn-in loop steps it (``state = online.step(obs[:, t], state).detach()``) is
exactly as right. Data: random observations, actions and rewards made in the script (the reward
follows the observation and the action). ``--out PATH`` saves every trained tensor. This file:
the bug twin."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--burn-in", type=int, default=4)
parser.add_argument("--unroll", type=int, default=6)
parser.add_argument("--sync", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

BATCH, OBS, HIDDEN, ACTIONS = 8, 5, 16, 3


class RecurrentQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(OBS, HIDDEN)
        self.core = nn.GRUCell(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, ACTIONS)

    def step(self, obs, state):
        return self.core(torch.relu(self.encoder(obs)), state)


def sample_sequences():
    """Replayed sequences: observations, actions, rewards and the actor's stored state."""
    length = args.burn_in + args.unroll + 1
    obs = torch.randn(BATCH, length, OBS)
    actions = torch.randint(ACTIONS, (BATCH, length))
    rewards = obs[:, :, 0] * (actions == 0).float() - 0.1 * (actions == 2).float()
    stored = 0.1 * torch.randn(BATCH, HIDDEN)
    return obs, actions, rewards, stored


online, target = RecurrentQ(), RecurrentQ()
optimizer = torch.optim.Adam(online.parameters(), lr=args.lr)
for it in range(args.iters):
    if it % args.sync == 0:
        target.load_state_dict(online.state_dict())
    obs, actions, rewards, stored = sample_sequences()
    with torch.no_grad():
        state_target = stored
        next_values = []
        for t in range(obs.shape[1]):
            state_target = target.step(obs[:, t], state_target)
            next_values.append(target.head(state_target).max(1).values)
    losses = []
    state = stored
    if args.burn_in > 0:
        for t in range(args.burn_in):
            state = online.step(obs[:, t], state)
    for t in range(args.burn_in, args.burn_in + args.unroll):
        state = online.step(obs[:, t], state)
        q = online.head(state).gather(1, actions[:, t:t + 1]).squeeze(1)
        td_target = rewards[:, t] + args.gamma * next_values[t + 1]
        losses.append(F.smooth_l1_loss(q, td_target))
    loss = torch.stack(losses).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in online.named_parameters()}, args.out)
