"""Retrace(lambda) Q-learning at a tiny size, written after Munos, Stepleton, Harutyunyan and
Bellemare, "Safe and Efficient Off-Policy Reinforcement Learning" (NeurIPS 2016, arXiv:1606.02647),
section 3 and the control setting of section 4, with google-deepmind/rlax
(https://github.com/google-deepmind/rlax, rlax/_src/value_learning.py retrace: the traces c_t =
lambda * min(1, pi(a_t|x_t) / mu(a_t|x_t)) and the target of rlax/_src/multistep.py
general_off_policy_returns_from_action_values, passed through jax.lax.stop_gradient with
stop_target_gradients=True) and the PyTorch recursion of Kaixhin/ACER
(https://github.com/Kaixhin/ACER, train.py _train: the importance ratio taken from
policies[i].detach(), truncated at 1, and the return Qret built from detached values). Sequences of
a noisy walk on a ring are collected once by a fixed stochastic behaviour policy mu, whose
probabilities are stored with the actions. A Q-network is trained off-policy towards the Retrace
target of a Boltzmann target policy pi = softmax(Q / temperature) of the online network; the
target's action values come from a target network (a deep copy, refreshed every few updates) under
torch.no_grad(), and pi, which also sets the truncated traces, is read from the online Q-values cut
from the graph, so that the whole target is a constant of the loss, as in the references. Injected
bug: the target policy is read from the online Q-values with their graph (F.softmax(q_online /
temperature) for q_online.detach()), so the Retrace target, through its expectation under pi and the
truncated traces min(1, pi / mu), carries gradient, and the loss also trains the Q-network through
its own target policy."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--seq-len", type=int, default=6)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--trace-lambda", type=float, default=1.0)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--target-period", type=int, default=8)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, hidden_dim, n_sequences = 8, 3, 32, 256


def make_replay(n, length):
    """Walks on a ring (left, stay, right, with slips); the reward is cos of the angle reached."""
    behaviour = F.softmax(torch.randn(n_states, n_actions), dim=1)
    states = torch.empty(length + 1, n, dtype=torch.long)
    actions = torch.empty(length + 1, n, dtype=torch.long)
    rewards = torch.empty(length, n)
    states[0] = torch.randint(0, n_states, (n,))
    for t in range(length):
        actions[t] = torch.multinomial(behaviour[states[t]], 1).squeeze(1)
        slip = torch.rand(n) < 0.1
        move = torch.where(slip, torch.randint(0, n_actions, (n,)), actions[t]) - 1
        states[t + 1] = (states[t] + move) % n_states
        rewards[t] = torch.cos(2 * math.pi * states[t + 1].float() / n_states)
    actions[length] = torch.multinomial(behaviour[states[length]], 1).squeeze(1)
    mu = behaviour[states].gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    return F.one_hot(states, n_states).float(), actions, rewards, mu


class QNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_states, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, n_actions))

    def forward(self, obs):
        return self.mlp(obs)


def retrace_targets(q_t, pi_t, c_t, a_t, r_t, discount):
    """Targets for x_0..x_{T-1} from the values, policy, traces and actions at x_1..x_T."""
    expected_q = (pi_t * q_t).sum(-1)
    q_a = q_t.gather(-1, a_t.unsqueeze(-1)).squeeze(-1)
    g = r_t[-1] + discount * expected_q[-1]
    targets = [g]
    for t in range(r_t.shape[0] - 2, -1, -1):
        g = r_t[t] + discount * (expected_q[t] + c_t[t] * (g - q_a[t]))
        targets.append(g)
    return torch.stack(targets[::-1])


replay = make_replay(n_sequences, args.seq_len)
q_net = QNetwork()
target_net = copy.deepcopy(q_net)
optimizer = torch.optim.Adam(q_net.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, n_sequences, (args.batch_size,))
    obs, actions, rewards, mu = (t[:, idx] for t in replay)
    q_online = q_net(obs)
    with torch.no_grad():
        q_target = target_net(obs)
    pi = F.softmax(q_online / args.temperature, dim=-1)
    pi_a = pi.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    c = args.trace_lambda * torch.clamp(pi_a / mu, max=1.0)
    returns = retrace_targets(q_target[1:], pi[1:], c[1:], actions[1:], rewards, args.gamma)
    q_a = q_online[:-1].gather(-1, actions[:-1].unsqueeze(-1)).squeeze(-1)
    loss = 0.5 * (returns - q_a).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % args.target_period == 0:
        target_net.load_state_dict(q_net.state_dict())
    print(f"step {step} loss {loss.item():.4f} mean trace {c.mean().item():.3f}")

if args.out:
    torch.save({"q_net": q_net.state_dict(), "target_net": target_net.state_dict()}, args.out)
