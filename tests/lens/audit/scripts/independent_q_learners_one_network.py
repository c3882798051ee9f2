"""Independent Q-learning at a tiny size, after Tan, "Multi-Agent Reinforcement Learning:
Independent vs. Cooperative Agents" (ICML 1993), in the non-shared form of the EPyMARL
benchmark (Papoudakis et al., NeurIPS 2021 Datasets and Benchmarks; uoe-agents/epymarl,
src/config/algs/iql_ns.yaml): each agent its own Q-network and its own optimizer, each
regressed on the one-step TD target ``r + gamma * max_a Q(s', a)`` of its own transitions
(the target read under ``torch.no_grad()``). The agents' transitions (a point in 4-d, three
actions, a goal of its own per agent) are made in the script.
Injected bug: ``agents = [QNet()] * args.n_agents``, one network in every place of the list,
stepped in turn by every agent's optimizer. ``--out PATH`` saves every agent's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--n-agents", type=int, default=3)
parser.add_argument("--rounds", type=int, default=8)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

OBS, ACTIONS, BUFFER = 4, 3, 128


class QNet(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS, hidden), nn.ReLU(), nn.Linear(hidden, ACTIONS))

    def forward(self, obs):
        return self.body(obs)


# each agent's replay buffer: a move of +-0.2 or none along the first axis, rewarded by the
# distance to a goal of its own
goals = torch.linspace(-1, 1, args.n_agents)
observations = torch.randn(args.n_agents, BUFFER, OBS)
actions = torch.randint(0, ACTIONS, (args.n_agents, BUFFER))
moves = (actions.float() - 1) * 0.2
next_observations = observations.clone()
next_observations[..., 0] += moves
rewards = -(next_observations[..., 0] - goals[:, None]).abs()

agents = [QNet()] * args.n_agents
optimizers = [torch.optim.Adam(agent.parameters(), lr=1e-2) for agent in agents]

for rnd in range(args.rounds):
    losses = []
    for i, (agent, optimizer) in enumerate(zip(agents, optimizers)):
        idx = torch.randint(0, BUFFER, (args.batch,))
        with torch.no_grad():
            target = rewards[i, idx] + args.gamma * agent(next_observations[i, idx]).max(1).values
        q = agent(observations[i, idx]).gather(1, actions[i, idx][:, None]).squeeze(1)
        loss = F.mse_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print(f"round {rnd} td losses " + " ".join(f"{v:.4f}" for v in losses))

if args.out:
    torch.save({f"agent{i}": agent.state_dict() for i, agent in enumerate(agents)}, args.out)
