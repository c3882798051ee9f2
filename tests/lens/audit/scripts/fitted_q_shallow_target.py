"""Neural fitted Q iteration at a tiny size, after Riedmiller, "Neural Fitted Q Iteration"
(ECML 2005) and the target-network form of Mnih et al. (Nature 2015, Algorithm 1): a fixed
batch of transitions, a Q-network regressed on ``r + gamma * max_a Q_target(s', a)``, the target
network a frozen copy of the Q-network refreshed every few iterations with
``load_state_dict``. The transitions (a point on a line, two actions) are made in the script.
Bug: the target network is ``copy.copy(q_net)``, a shallow copy whose layers are the Q-network's own,
so the TD target moves with every step (read under ``torch.no_grad()``, it looks like a target).
``--out PATH`` saves both networks' weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=12)
parser.add_argument("--refresh", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

states = torch.rand(64, 1) * 2 - 1
actions = torch.randint(0, 2, (64,))
next_states = (states + torch.where(actions[:, None] == 1, 0.1, -0.1)).clamp(-1, 1)
rewards = -next_states.abs().squeeze(1)

q_net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 2))
target_net = copy.copy(q_net)
optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-2)

for it in range(args.iterations):
    with torch.no_grad():
        target = rewards + args.gamma * target_net(next_states).max(1).values
    q = q_net(states).gather(1, actions[:, None]).squeeze(1)
    loss = F.mse_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (it + 1) % args.refresh == 0:
        target_net.load_state_dict(q_net.state_dict())
    print(f"iteration {it} loss {loss.item():.4f}")

if args.out:
    torch.save({"q": q_net.state_dict(), "target": target_net.state_dict()}, args.out)
