"""Categorical DQN (C51) at a tiny size, written after Bellemare, Dabney and Munos, "A
Distributional Perspective on Reinforcement Learning" (ICML 2017, arXiv:1707.06887), algorithm 1
(the categorical projection of the distributional Bellman target onto a fixed support of atoms and
the cross-entropy loss), with vwxyzjn/cleanrl (https://github.com/vwxyzjn/cleanrl, cleanrl/c51.py:
QNetwork.get_action, a softmax over the atoms of each action and the greedy action of the largest
mean; the training loop, which reads the next-state distribution of the target network's greedy
action and projects r + gamma * z onto the support under torch.no_grad(), a target network built
apart and loaded from the online one every target_network_frequency steps, and learning_starts) and
google/dopamine (https://github.com/google/dopamine, dopamine/agents/rainbow/rainbow_agent.py
project_distribution and RainbowAgent._build_train_op, which takes the projected target of
_build_target_distribution under tf.stop_gradient). Two phases as in cleanrl's learning_starts: a
warm-up of uniformly random actions that only fills the replay buffer, then epsilon-greedy acting
with one update per environment step. A small stochastic chain (move left, stay or move right, with
a slip and a noisy reward), made in the script. As published: clean."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--learning-starts", type=int, default=40)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--n-atoms", type=int, default=11)
parser.add_argument("--v-min", type=float, default=-2.0)
parser.add_argument("--v-max", type=float, default=4.0)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--epsilon", type=float, default=0.2)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--target-network-frequency", type=int, default=5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, hidden_dim, episode_len = 6, 3, 32, 12
eye = torch.eye(n_states)


def step_env(state, action):
    """Action 0 moves left, 1 stays, 2 moves right; a slip moves at random."""
    move = action - 1 if torch.rand(()) > 0.2 else int(torch.randint(-1, 2, ()))
    next_state = min(max(state + move, 0), n_states - 1)
    reward = next_state / n_states + (0.1 + next_state / n_states) * float(torch.randn(()))
    return next_state, reward, float(next_state == n_states - 1)


class CategoricalQNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("atoms", torch.linspace(args.v_min, args.v_max, args.n_atoms))
        self.net = nn.Sequential(nn.Linear(n_states, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, n_actions * args.n_atoms))

    def forward(self, obs, action=None):
        """The distribution over the atoms of `action`, or of the greedy action when None."""
        pmfs = self.net(obs).view(-1, n_actions, args.n_atoms).softmax(dim=-1)
        if action is None:
            action = (pmfs * self.atoms).sum(-1).argmax(dim=1)
        return action, pmfs[torch.arange(len(obs)), action]


def project(next_pmfs, rewards, dones, atoms):
    """Categorical projection of r + gamma * z onto the support (algorithm 1, lines 5-9)."""
    delta_z = atoms[1] - atoms[0]
    tz = (rewards + args.gamma * (1 - dones) * atoms).clamp(args.v_min, args.v_max)
    b = (tz - args.v_min) / delta_z
    lower, upper = b.floor().long(), b.ceil().long()
    to_lower = (upper.float() + (lower == upper).float() - b) * next_pmfs
    to_upper = (b - lower.float()) * next_pmfs
    target = torch.zeros_like(next_pmfs)
    target.scatter_add_(1, lower, to_lower)
    target.scatter_add_(1, upper, to_upper)
    return target


q_network = CategoricalQNetwork()
optimizer = torch.optim.Adam(q_network.parameters(), lr=args.lr)
target_network = copy.deepcopy(q_network)
buffer = {k: [] for k in ("obs", "act", "rew", "next_obs", "done")}

state, t = int(torch.randint(0, n_states, ())), 0
for step in range(args.learning_starts + args.steps):
    if step < args.learning_starts or torch.rand(()) < args.epsilon:
        action = int(torch.randint(0, n_actions, ()))
    else:
        with torch.no_grad():
            action = int(q_network(eye[state].unsqueeze(0))[0])
    next_state, reward, done = step_env(state, action)
    t += 1
    for k, v in zip(buffer, (eye[state], action, reward, eye[next_state], done)):
        buffer[k].append(v)
    state = next_state
    if done or t == episode_len:
        state, t = int(torch.randint(0, n_states, ())), 0
    if step < args.learning_starts:  # phase 1: random actions fill the buffer, no update
        continue
    idx = torch.randint(0, len(buffer["obs"]), (args.batch_size,))
    obs, next_obs = torch.stack(buffer["obs"])[idx], torch.stack(buffer["next_obs"])[idx]
    actions = torch.tensor(buffer["act"])[idx]
    rewards = torch.tensor(buffer["rew"])[idx].unsqueeze(1)
    dones = torch.tensor(buffer["done"])[idx].unsqueeze(1)
    with torch.no_grad():
        _, next_pmfs = target_network(next_obs)
        target_pmfs = project(next_pmfs, rewards, dones, target_network.atoms)
    _, old_pmfs = q_network(obs, actions)
    loss = -(target_pmfs * old_pmfs.clamp(1e-5, 1 - 1e-5).log()).sum(-1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step - args.learning_starts + 1) % args.target_network_frequency == 0:
        target_network.load_state_dict(q_network.state_dict())
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"q_network": q_network.state_dict(),
                "target_network": target_network.state_dict()}, args.out)
