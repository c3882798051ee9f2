"""Conservative Q-learning with discrete actions at a tiny size, written after Kumar, Zhou, Tucker
and Levine, "Conservative Q-Learning for Offline Reinforcement Learning" (NeurIPS 2020,
arXiv:2006.04779), equation 4 (the CQL(H) regulariser), with the DQN version of BY571/CQL
(https://github.com/BY571/CQL, CQL-DQN/agent.py CQLAgent.learn and soft_update, CQL-DQN/networks.py
DDQN). The loss is the Bellman error against the maximum over actions of a target network (a deep
copy of the Q-network, Polyak-averaged towards it after each update), computed under
torch.no_grad(), plus alpha times the conservative term logsumexp_a Q(s, a) - Q(s, a_data), which
trains the Q-network at every action of the batch's states; one Adam over the Q-network, its
gradient clipped at norm 1. Offline transitions of a small chain with three actions (left, stay,
right) from a noisy behaviour policy that mostly walks right, made in the script. Injected bug: the
target network is the Q-network itself (``target_net = network`` for a deep copy), so the soft update
copies it onto itself and, from the second step on, the targets are the maximum of the network
being trained (still under torch.no_grad(), with no lag)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=1e-2)
parser.add_argument("--alpha", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, layer_size, n_transitions = 8, 3, 32, 400


def collect(n):
    """A behaviour policy that goes right with probability 0.6; the far right end pays 1 and ends."""
    states = torch.randint(0, n_states - 1, (n,))
    actions = torch.multinomial(torch.tensor([0.2, 0.2, 0.6]), n, replacement=True)
    next_states = (states + actions - 1).clamp(0, n_states - 1)
    rewards = (next_states == n_states - 1).float()
    dones = rewards.clone()
    return (F.one_hot(states, n_states).float(), actions.unsqueeze(1), rewards.unsqueeze(1),
            F.one_hot(next_states, n_states).float(), dones.unsqueeze(1))


class DDQN(nn.Module):
    def __init__(self, state_size, action_size, layer_size):
        super().__init__()
        self.head_1 = nn.Linear(state_size, layer_size)
        self.ff_1 = nn.Linear(layer_size, layer_size)
        self.ff_2 = nn.Linear(layer_size, action_size)

    def forward(self, x):
        x = torch.relu(self.head_1(x))
        x = torch.relu(self.ff_1(x))
        return self.ff_2(x)


def soft_update(local_model, target_model, tau):
    for target_param, local_param in zip(target_model.parameters(), local_model.parameters()):
        target_param.data.copy_(tau * local_param.data + (1.0 - tau) * target_param.data)


buffer = collect(n_transitions)
network = DDQN(n_states, n_actions, layer_size)
target_net = network
optimizer = torch.optim.Adam(network.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    states, actions, rewards, next_states, dones = (t[idx] for t in buffer)
    with torch.no_grad():
        Q_targets_next = target_net(next_states).max(1)[0].unsqueeze(1)
        Q_targets = rewards + args.gamma * Q_targets_next * (1 - dones)
    Q_a_s = network(states)
    Q_expected = Q_a_s.gather(1, actions)
    cql1_loss = torch.logsumexp(Q_a_s, dim=1).mean() - Q_expected.mean()
    bellman_error = F.mse_loss(Q_expected, Q_targets)
    q1_loss = args.alpha * cql1_loss + 0.5 * bellman_error
    optimizer.zero_grad()
    q1_loss.backward()
    nn.utils.clip_grad_norm_(network.parameters(), 1.0)
    optimizer.step()
    soft_update(network, target_net, args.tau)
    print(f"step {step} cql {cql1_loss.item():.4f} bellman {bellman_error.item():.4f}")

if args.out:
    torch.save({"network": network.state_dict(), "target_net": target_net.state_dict()}, args.out)
