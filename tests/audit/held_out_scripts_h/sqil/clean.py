"""Soft Q imitation learning at a tiny size, written after Reddy, Dragan and Levine, "SQIL:
Imitation Learning via Reinforcement Learning with Sparse Rewards" (ICLR 2020, arXiv:1905.11108),
Algorithm 1 and equation 1 (soft Q-learning on a balanced batch: demonstrations with reward 1, the
agent's own transitions with reward 0, the squared soft Bellman error with the soft value
log sum_a' exp Q(s', a')), with the SQIL of HumanCompatibleAI/imitation
(https://github.com/HumanCompatibleAI/imitation, src/imitation/algorithms/sqil.py
SQILReplayBuffer: set_demonstrations stores the expert transitions with reward 1, add stores the
agent's with reward 0, sample takes half of the batch from each) and the Q-learning step of the
DQN it wraps, DLR-RM/stable-baselines3 (https://github.com/DLR-RM/stable-baselines3,
stable_baselines3/dqn/dqn.py DQN.train: the next-state values read from q_net_target under
th.no_grad(), the target network a separate copy synchronised every target_update_interval
steps). The agent acts by the Boltzmann policy of its soft Q-function and adds one transition per
step; after a few uniformly random steps to seed its buffer, every step regresses Q(s, a) on
r + gamma * (1 - done) * alpha * logsumexp(Q_target(s') / alpha), the target network a deep copy
of the Q-network loaded from it every few steps. A 5 x 5 grid walk to a corner with a scripted
expert, made in the script. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--random-steps", type=int, default=32)
parser.add_argument("--demo-episodes", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--alpha", type=float, default=1.0)
parser.add_argument("--target-update-interval", type=int, default=8)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, n_actions, horizon, hidden = 5, 4, 12, 32
moves = [(1, 0), (0, 1), (-1, 0), (0, -1)]  # right, up, left, down; the goal is (4, 4)


def encode(cell):
    obs = torch.zeros(2 * size)
    obs[cell[0]] = 1.0
    obs[size + cell[1]] = 1.0
    return obs


def reset():
    return (torch.randint(0, size - 1, ()).item(), torch.randint(0, size - 1, ()).item())


def env_step(cell, action):
    dx, dy = moves[action]
    nxt = (min(max(cell[0] + dx, 0), size - 1), min(max(cell[1] + dy, 0), size - 1))
    return nxt, float(nxt == (size - 1, size - 1))


def expert_action(cell):
    if cell[0] < size - 1 and (cell[1] == size - 1 or torch.rand(()).item() < 0.5):
        return 0
    return 1


def make_demonstrations(n_episodes):
    transitions = []
    for _ in range(n_episodes):
        cell = reset()
        for _ in range(horizon):
            action = expert_action(cell)
            nxt, done = env_step(cell, action)
            transitions.append((encode(cell), action, encode(nxt), done))
            cell = nxt
            if done:
                break
    return transitions


def sample(buffer, n):
    idx = torch.randint(0, len(buffer), (n,)).tolist()
    obs, actions, next_obs, dones = zip(*(buffer[i] for i in idx))
    return (torch.stack(obs), torch.tensor(actions), torch.stack(next_obs), torch.tensor(dones))


demo_buffer = make_demonstrations(args.demo_episodes)  # reward 1
agent_buffer = []  # reward 0
q_net = nn.Sequential(nn.Linear(2 * size, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                      nn.ReLU(), nn.Linear(hidden, n_actions))
target_q_net = copy.deepcopy(q_net)
optimizer = torch.optim.Adam(q_net.parameters(), lr=args.lr)

cell, t = reset(), 0
for step in range(args.random_steps + args.steps):
    # act: uniformly at first, then by the Boltzmann policy of the soft Q-function
    if step < args.random_steps:
        action = torch.randint(0, n_actions, ()).item()
    else:
        with torch.no_grad():
            probs = F.softmax(q_net(encode(cell)) / args.alpha, dim=-1)
        action = torch.multinomial(probs, 1).item()
    nxt, done = env_step(cell, action)
    agent_buffer.append((encode(cell), action, encode(nxt), done))
    cell, t = (reset(), 0) if done or t + 1 == horizon else (nxt, t + 1)
    if step < args.random_steps:
        continue
    # update: half demonstrations (reward 1), half the agent's transitions (reward 0)
    half = args.batch_size // 2
    demo, own = sample(demo_buffer, half), sample(agent_buffer, half)
    obs, actions, next_obs, dones = (torch.cat(pair) for pair in zip(demo, own))
    rewards = torch.cat([torch.ones(half), torch.zeros(half)])
    with torch.no_grad():
        next_v = args.alpha * torch.logsumexp(target_q_net(next_obs) / args.alpha, dim=1)
        target_q = rewards + args.gamma * (1.0 - dones) * next_v
    q = q_net(obs).gather(1, actions[:, None]).squeeze(1)
    loss = F.mse_loss(q, target_q)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    update = step - args.random_steps
    if (update + 1) % args.target_update_interval == 0:
        target_q_net.load_state_dict(q_net.state_dict())
    print(f"update {update} soft Bellman error {loss.item():.4f}")

if args.out:
    torch.save({"q_net": q_net.state_dict(), "target_q_net": target_q_net.state_dict()}, args.out)
