"""QMIX at a tiny size, written after Rashid, Samvelyan, Schroeder de Witt, Farquhar, Foerster and
Whiteson, "QMIX: Monotonic Value Function Factorisation for Deep Multi-Agent Reinforcement
Learning" (ICML 2018, arXiv:1803.11485), with oxwhirl/pymarl (https://github.com/oxwhirl/pymarl,
src/learners/q_learner.py QLearner, src/modules/mixers/qmix.py QMixer). One agent network, its
parameters shared by the agents (each agent's one-hot id appended to its observation), gives each
agent's Q-values; the chosen ones are mixed into Q_tot by a monotonic mixing network whose weights
are made by hypernetworks of the global state and kept non-negative by abs. The targets are the
rewards plus the discounted Q_tot that target agents and a target mixer (deep copies of the online
ones, loaded from them every ``target_update`` steps) give the agents' greedy next actions, all
under torch.no_grad(); one RMSprop optimizer over the agent's and the mixer's parameters steps
both, after their gradient norm is clipped. Transitions of a small two-agent cooperative stateful
matrix game (each agent sees half of the state, the mixer sees all of it), with random actions,
collected in the script into a replay buffer. Injected bug: the optimizer is built from the
parameter list before the mixer's parameters are appended to it (the optimizer copies the list it
is given), so the gradient clipping sees the mixer's gradients but the optimizer steps the agent's
parameters only and the hypernetworks of the mixer never train."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--grad-norm-clip", type=float, default=10.0)
parser.add_argument("--target-update", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_agents, n_actions, n_states, obs_dim, embed_dim = 2, 3, 4, 2, 8
payoff = torch.randn(n_states, n_actions, n_actions)  # common reward of each state and joint action


def collect(n):
    """Random joint actions; the state moves by the difference of the two agents' actions."""
    states = torch.randint(0, n_states, (n,))
    actions = torch.randint(0, n_actions, (n, n_agents))
    rewards = payoff[states, actions[:, 0], actions[:, 1]]
    next_states = (states + actions[:, 0] - actions[:, 1]) % n_states
    dones = (torch.rand(n) < 0.2).float()
    return states, actions, rewards, next_states, dones


def observe(states):
    """Agent 0 sees state // 2, agent 1 sees state % 2; each with its one-hot id appended."""
    obs = torch.stack([F.one_hot(states // 2, obs_dim), F.one_hot(states % 2, obs_dim)], dim=1)
    ids = torch.eye(n_agents).expand(len(states), -1, -1)
    return torch.cat([obs.float(), ids], dim=2)  # (batch, n_agents, obs_dim + n_agents)


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim + n_agents, 32)
        self.fc2 = nn.Linear(32, n_actions)

    def forward(self, inputs):
        return self.fc2(F.relu(self.fc1(inputs)))


class QMixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.hyper_w_1 = nn.Linear(n_states, embed_dim * n_agents)
        self.hyper_w_final = nn.Linear(n_states, embed_dim)
        self.hyper_b_1 = nn.Linear(n_states, embed_dim)
        self.V = nn.Sequential(nn.Linear(n_states, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def forward(self, agent_qs, states):
        agent_qs = agent_qs.view(-1, 1, n_agents)
        w1 = torch.abs(self.hyper_w_1(states)).view(-1, n_agents, embed_dim)
        b1 = self.hyper_b_1(states).view(-1, 1, embed_dim)
        hidden = F.elu(torch.bmm(agent_qs, w1) + b1)
        w_final = torch.abs(self.hyper_w_final(states)).view(-1, embed_dim, 1)
        v = self.V(states).view(-1, 1, 1)
        return (torch.bmm(hidden, w_final) + v).view(-1)


buffer = collect(512)
agent = Agent()
mixer = QMixer()
target_agent = copy.deepcopy(agent)
target_mixer = copy.deepcopy(mixer)
params = list(agent.parameters())
optimiser = torch.optim.RMSprop(params, lr=args.lr, alpha=0.99, eps=1e-5)
params += list(mixer.parameters())
for step in range(args.steps):
    idx = torch.randint(0, len(buffer[0]), (args.batch_size,))
    states, actions, rewards, next_states, dones = (t[idx] for t in buffer)
    agent_qs = agent(observe(states))  # (batch, n_agents, n_actions)
    chosen_action_qvals = agent_qs.gather(2, actions.unsqueeze(2)).squeeze(2)
    q_tot = mixer(chosen_action_qvals, F.one_hot(states, n_states).float())
    with torch.no_grad():
        target_max_qvals = target_agent(observe(next_states)).max(dim=2).values
        target_q_tot = target_mixer(target_max_qvals, F.one_hot(next_states, n_states).float())
        targets = rewards + args.gamma * (1 - dones) * target_q_tot
    loss = ((q_tot - targets) ** 2).mean()
    optimiser.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(params, args.grad_norm_clip)
    optimiser.step()
    if (step + 1) % args.target_update == 0:
        target_agent.load_state_dict(agent.state_dict())
        target_mixer.load_state_dict(mixer.state_dict())
    print(f"step {step} td loss {loss.item():.4f} grad norm {grad_norm.item():.3f}")

if args.out:
    torch.save({"agent": agent.state_dict(), "mixer": mixer.state_dict(),
                "target_agent": target_agent.state_dict(),
                "target_mixer": target_mixer.state_dict()}, args.out)
