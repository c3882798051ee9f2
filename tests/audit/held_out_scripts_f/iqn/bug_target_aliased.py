"""Implicit quantile networks at a tiny size, written after Dabney, Ostrovski, Silver and Munos,
"Implicit Quantile Networks for Distributional Reinforcement Learning" (ICML 2018,
arXiv:1806.06923), with the agent of toshikwa/fqf-iqn-qrdqn.pytorch
(https://github.com/toshikwa/fqf-iqn-qrdqn.pytorch, fqf_iqn_qrdqn/agent/iqn_agent.py,
fqf_iqn_qrdqn/model/iqn.py and fqf_iqn_qrdqn/utils.py): the state embedding is multiplied by a
cosine embedding of sampled quantile fractions ``tau`` and mapped to one quantile value per action;
the targets are the rewards plus the discounted quantile values of a target network (a deep copy of
the online network, loaded from it every ``target_update`` steps) at ``N'`` other fractions, for the
action that maximises its mean over ``K`` fractions, all under torch.no_grad(); the loss is the
quantile Huber loss over the ``N x N'`` pairs. Transitions of a small stochastic chain, with random
actions, collected in the script into a replay buffer. Injected bug: the target network is made with
copy.copy (for copy.deepcopy), a shallow copy whose modules and parameters are the online network's
own, so the periodic load_state_dict copies it onto itself and, from the second step, the targets
are the quantile values of the network being trained."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--N", type=int, default=8)
parser.add_argument("--N-dash", type=int, default=8)
parser.add_argument("--K", type=int, default=16)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--kappa", type=float, default=1.0)
parser.add_argument("--target-update", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, num_cosines, embedding_dim = 6, 2, 16, 32


def collect(n):
    """Random-action transitions of a chain: right or left, slipping with probability 0.2."""
    states = torch.randint(1, n_states - 1, (n,))
    actions = torch.randint(0, n_actions, (n,))
    move = torch.where(actions == 1, 1, -1) * torch.where(torch.rand(n) < 0.2, -1, 1)
    next_states = (states + move).clamp(0, n_states - 1)
    rewards = torch.where(next_states == n_states - 1, 1.0 + 0.5 * torch.randn(n),
                          torch.where(next_states == 0, 0.2 * torch.ones(n), torch.zeros(n)))
    dones = ((next_states == 0) | (next_states == n_states - 1)).float()
    return (F.one_hot(states, n_states).float(), actions, rewards,
            F.one_hot(next_states, n_states).float(), dones)


class IQN(nn.Module):
    def __init__(self):
        super().__init__()
        self.dqn_net = nn.Sequential(nn.Linear(n_states, embedding_dim), nn.ReLU())
        self.cosine_net = nn.Sequential(nn.Linear(num_cosines, embedding_dim), nn.ReLU())
        self.quantile_net = nn.Sequential(nn.Linear(embedding_dim, 32), nn.ReLU(),
                                          nn.Linear(32, n_actions))

    def forward(self, states, taus):
        state_embeddings = self.dqn_net(states)  # (batch, embedding)
        i_pi = math.pi * torch.arange(1, num_cosines + 1).float()
        tau_embeddings = self.cosine_net(torch.cos(taus.unsqueeze(-1) * i_pi))  # (batch, N, emb)
        return self.quantile_net(state_embeddings.unsqueeze(1) * tau_embeddings)  # (b, N, A)

    def calculate_q(self, states):
        taus = torch.rand(states.shape[0], args.K)
        return self(states, taus).mean(dim=1)


def quantile_huber_loss(td_errors, taus, kappa):
    huber = torch.where(td_errors.abs() <= kappa, 0.5 * td_errors.pow(2),
                        kappa * (td_errors.abs() - 0.5 * kappa))
    weight = torch.abs(taus.unsqueeze(-1) - (td_errors.detach() < 0).float())
    return (weight * huber / kappa).sum(dim=1).mean(dim=1).mean()


buffer = collect(512)
online_net = IQN()
target_net = copy.copy(online_net)
optimizer = torch.optim.Adam(online_net.parameters(), lr=3e-3, eps=1e-2 / args.batch_size)
for step in range(args.steps):
    idx = torch.randint(0, len(buffer[0]), (args.batch_size,))
    states, actions, rewards, next_states, dones = (t[idx] for t in buffer)
    taus = torch.rand(args.batch_size, args.N)
    current_sa = online_net(states, taus).gather(
        2, actions.view(-1, 1, 1).expand(-1, args.N, 1))  # (batch, N, 1)
    with torch.no_grad():
        next_actions = target_net.calculate_q(next_states).argmax(dim=1)
        tau_dashes = torch.rand(args.batch_size, args.N_dash)
        next_sa = target_net(next_states, tau_dashes).gather(
            2, next_actions.view(-1, 1, 1).expand(-1, args.N_dash, 1)).transpose(1, 2)
        target_sa = (rewards.view(-1, 1, 1)
                     + (1.0 - dones.view(-1, 1, 1)) * args.gamma * next_sa)  # (batch, 1, N')
    td_errors = target_sa - current_sa  # (batch, N, N')
    loss = quantile_huber_loss(td_errors, taus, args.kappa)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % args.target_update == 0:
        target_net.load_state_dict(online_net.state_dict())
    print(f"step {step} quantile huber loss {loss.item():.4f}")

if args.out:
    torch.save({"online": online_net.state_dict(), "target": target_net.state_dict()}, args.out)
