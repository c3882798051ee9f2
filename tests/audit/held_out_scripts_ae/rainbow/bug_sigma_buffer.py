"""Rainbow DQN (noisy, dueling, distributional, n-step, prioritized) on a tiny chain.

Paper: Matteo Hessel, Joseph Modayil, Hado van Hasselt, Tom Schaul, Georg Ostrovski, Will Dabney,
Dan Horgan, Bilal Piot, Mohammad Azar and David Silver, "Rainbow: Combining Improvements in Deep
Reinforcement Learning", AAAI 2018, arXiv:1710.02298 (2017).
Reference implementation: Kaixhin/Rainbow, model.py (NoisyLinear: factorised Gaussian noise with
learned weight_mu / weight_sigma / bias_mu / bias_sigma parameters and weight_epsilon /
bias_epsilon buffers, reset_parameters, _scale_noise, reset_noise; DQN: value and advantage
streams fc_h_v / fc_z_v and fc_h_a / fc_z_a, q = v + a - mean(a) over the actions, then a
(log-)softmax over the atoms), agent.py (Agent: a target_net loaded from the online_net's
state_dict with requires_grad = False; learn: log-probabilities of the taken actions from the
online net, then under torch.no_grad() double-Q selection with the online net, the target net's
distribution, the n-step Bellman update Tz, its projection m onto the support, the
cross-entropy loss weighted by the importance-sampling weights, online_net.zero_grad(),
backward, Adam step and the new priorities from the detached loss), memory.py
(ReplayMemory: new transitions get the maximum priority, sampling proportional to the priority
raised to the exponent omega, weights (N P)^-beta normalised by their maximum) and main.py (the
loop: reset_noise every replay step, learn after learn_start, the priority weight beta annealed
to 1, update_target_net every target_update steps).

The environment is a chain of 7 states with one-hot observations, started in state 1; action 0
moves left, action 1 right; the left end pays 0.1 and the right end 1.0, both end the episode,
and an episode is cut after 12 steps. A plain nn.Linear encoder stands in for the convolutions.
n-step returns are formed when a transition enters the memory (a small deque of the last n
steps, flushed at episode ends); the memory samples with torch.multinomial instead of the
segment tree. One Adam optimizer holds every online parameter; the target net is frozen and is
refreshed by load_state_dict every target_update steps.
Bug: NoisyLinear registers weight_sigma as a buffer instead of an nn.Parameter, so the learned
noise scale of every noisy weight matrix is never trained and stays at std_init / sqrt(in).
"""
import argparse
import math
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--T_max", type=int, default=100)
parser.add_argument("--learn_start", type=int, default=40)
parser.add_argument("--chain_len", type=int, default=7)
parser.add_argument("--max_episode_length", type=int, default=12)
parser.add_argument("--hidden_size", type=int, default=32)
parser.add_argument("--noisy_std", type=float, default=0.1)
parser.add_argument("--atoms", type=int, default=11)
parser.add_argument("--V_min", type=float, default=-2.0)
parser.add_argument("--V_max", type=float, default=2.0)
parser.add_argument("--multi_step", type=int, default=3)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--priority_exponent", type=float, default=0.5)
parser.add_argument("--priority_weight", type=float, default=0.4)
parser.add_argument("--target_update", type=int, default=20)
parser.add_argument("--learning_rate", type=float, default=1e-3)
parser.add_argument("--adam_eps", type=float, default=1.5e-4)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


class ChainEnv:
    def __init__(self, n, max_steps):
        self.n, self.max_steps = n, max_steps

    def obs(self):
        return F.one_hot(torch.tensor(self.pos), self.n).float()

    def reset(self):
        self.pos, self.t = 1, 0
        return self.obs()

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        self.t += 1
        reward = 1.0 if self.pos == self.n - 1 else (0.1 if self.pos == 0 else 0.0)
        done = self.pos in (0, self.n - 1) or self.t >= self.max_steps
        return self.obs(), reward, done


class NoisyLinear(nn.Module):
    def __init__(self, in_features, out_features, std_init=0.5):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.std_init = std_init
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.register_buffer("weight_sigma", torch.empty(out_features, in_features))
        self.register_buffer("weight_epsilon", torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("bias_epsilon", torch.empty(out_features))
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self):
        mu_range = 1.0 / math.sqrt(self.in_features)
        self.weight_mu.data.uniform_(-mu_range, mu_range)
        self.weight_sigma.data.fill_(self.std_init / math.sqrt(self.in_features))
        self.bias_mu.data.uniform_(-mu_range, mu_range)
        self.bias_sigma.data.fill_(self.std_init / math.sqrt(self.out_features))

    def _scale_noise(self, size):
        x = torch.randn(size)
        return x.sign() * x.abs().sqrt()

    def reset_noise(self):
        eps_in = self._scale_noise(self.in_features)
        eps_out = self._scale_noise(self.out_features)
        self.weight_epsilon.copy_(torch.outer(eps_out, eps_in))
        self.bias_epsilon.copy_(eps_out)

    def forward(self, x):
        if self.training:
            weight = self.weight_mu + self.weight_sigma * self.weight_epsilon
            bias = self.bias_mu + self.bias_sigma * self.bias_epsilon
            return F.linear(x, weight, bias)
        return F.linear(x, self.weight_mu, self.bias_mu)


class DQN(nn.Module):
    def __init__(self, obs_size, action_space, hidden_size, atoms, noisy_std):
        super().__init__()
        self.atoms, self.action_space = atoms, action_space
        self.encoder = nn.Sequential(nn.Linear(obs_size, hidden_size), nn.ReLU())
        self.fc_h_v = NoisyLinear(hidden_size, hidden_size, std_init=noisy_std)
        self.fc_h_a = NoisyLinear(hidden_size, hidden_size, std_init=noisy_std)
        self.fc_z_v = NoisyLinear(hidden_size, atoms, std_init=noisy_std)
        self.fc_z_a = NoisyLinear(hidden_size, action_space * atoms, std_init=noisy_std)

    def forward(self, x, log=False):
        x = self.encoder(x)
        v = self.fc_z_v(F.relu(self.fc_h_v(x)))
        a = self.fc_z_a(F.relu(self.fc_h_a(x)))
        v, a = v.view(-1, 1, self.atoms), a.view(-1, self.action_space, self.atoms)
        q = v + a - a.mean(1, keepdim=True)
        return F.log_softmax(q, dim=2) if log else F.softmax(q, dim=2)

    def reset_noise(self):
        for name, module in self.named_children():
            if "fc" in name:
                module.reset_noise()


class ReplayMemory:
    def __init__(self, discount, n, priority_exponent, priority_weight):
        self.discount, self.n = discount, n
        self.priority_exponent, self.priority_weight = priority_exponent, priority_weight
        self.data, self.priorities, self.max_priority = [], [], 1.0
        self.recent = deque()

    def _emit(self, next_state, nonterminal):
        state, action, _ = self.recent[0]
        ret = sum(r * self.discount ** k for k, (_, _, r) in enumerate(self.recent))
        self.data.append((state, action, ret, next_state, nonterminal))
        self.priorities.append(self.max_priority)
        self.recent.popleft()

    def append(self, state, action, reward, next_state, done):
        self.recent.append((state, action, reward))
        if len(self.recent) == self.n:
            self._emit(next_state, 0.0 if done else 1.0)
        if done:
            while self.recent:
                self._emit(next_state, 0.0)

    def __len__(self):
        return len(self.data)

    def sample(self, batch_size):
        p = torch.tensor(self.priorities)
        probs = p / p.sum()
        idxs = torch.multinomial(probs, batch_size, replacement=True)
        weights = (len(self.data) * probs[idxs]) ** -self.priority_weight
        weights = weights / weights.max()
        batch = [self.data[i] for i in idxs.tolist()]
        states = torch.stack([b[0] for b in batch])
        actions = torch.tensor([b[1] for b in batch])
        returns = torch.tensor([b[2] for b in batch])
        next_states = torch.stack([b[3] for b in batch])
        nonterminals = torch.tensor([[b[4]] for b in batch])
        return idxs, states, actions, returns, next_states, nonterminals, weights

    def update_priorities(self, idxs, priorities):
        for i, p in zip(idxs.tolist(), priorities.tolist()):
            self.priorities[i] = p ** self.priority_exponent
            self.max_priority = max(self.max_priority, self.priorities[i])


class Agent:
    def __init__(self, args, obs_size, action_space):
        self.action_space = action_space
        self.atoms, self.Vmin, self.Vmax = args.atoms, args.V_min, args.V_max
        self.support = torch.linspace(args.V_min, args.V_max, self.atoms)
        self.delta_z = (args.V_max - args.V_min) / (self.atoms - 1)
        self.batch_size, self.n, self.discount = args.batch_size, args.multi_step, args.discount

        self.online_net = DQN(obs_size, action_space, args.hidden_size, args.atoms,
                              args.noisy_std)
        self.online_net.train()
        self.target_net = DQN(obs_size, action_space, args.hidden_size, args.atoms,
                              args.noisy_std)
        self.update_target_net()
        self.target_net.train()
        for param in self.target_net.parameters():
            param.requires_grad = False
        self.optimiser = torch.optim.Adam(self.online_net.parameters(), lr=args.learning_rate,
                                          eps=args.adam_eps)

    def reset_noise(self):
        self.online_net.reset_noise()

    def act(self, state):
        with torch.no_grad():
            return (self.online_net(state.unsqueeze(0)) * self.support).sum(2).argmax(1).item()

    def learn(self, mem):
        idxs, states, actions, returns, next_states, nonterminals, weights = \
            mem.sample(self.batch_size)
        log_ps = self.online_net(states, log=True)
        log_ps_a = log_ps[range(self.batch_size), actions]

        with torch.no_grad():
            pns = self.online_net(next_states)
            dns = self.support.expand_as(pns) * pns
            argmax_indices_ns = dns.sum(2).argmax(1)
            self.target_net.reset_noise()
            pns = self.target_net(next_states)
            pns_a = pns[range(self.batch_size), argmax_indices_ns]

            Tz = returns.unsqueeze(1) + nonterminals * (self.discount ** self.n) * \
                self.support.unsqueeze(0)
            Tz = Tz.clamp(min=self.Vmin, max=self.Vmax)
            b = (Tz - self.Vmin) / self.delta_z
            l, u = b.floor().to(torch.int64), b.ceil().to(torch.int64)
            l[(u > 0) * (l == u)] -= 1
            u[(l < (self.atoms - 1)) * (l == u)] += 1

            m = states.new_zeros(self.batch_size, self.atoms)
            offset = (torch.arange(self.batch_size) * self.atoms).unsqueeze(1)
            offset = offset.expand(self.batch_size, self.atoms)
            m.view(-1).index_add_(0, (l + offset).view(-1), (pns_a * (u.float() - b)).view(-1))
            m.view(-1).index_add_(0, (u + offset).view(-1), (pns_a * (b - l.float())).view(-1))

        loss = -torch.sum(m * log_ps_a, 1)
        self.online_net.zero_grad()
        (weights * loss).mean().backward()
        self.optimiser.step()

        mem.update_priorities(idxs, loss.detach())
        return (weights * loss).mean().item()

    def update_target_net(self):
        self.target_net.load_state_dict(self.online_net.state_dict())


env = ChainEnv(args.chain_len, args.max_episode_length)
dqn = Agent(args, args.chain_len, 2)
mem = ReplayMemory(args.discount, args.multi_step, args.priority_exponent, args.priority_weight)
priority_weight_increase = (1 - args.priority_weight) / (args.T_max - args.learn_start)

state, done, episode_return, n_updates = env.reset(), False, 0.0, 0
for T in range(1, args.T_max + 1):
    if done:
        print(f"T {T:3d} episode return {episode_return:.2f}")
        state, done, episode_return = env.reset(), False, 0.0
    dqn.reset_noise()
    action = dqn.act(state)
    next_state, reward, done = env.step(action)
    episode_return += reward
    mem.append(state, action, reward, next_state, done)
    state = next_state

    if T >= args.learn_start:
        mem.priority_weight = min(mem.priority_weight + priority_weight_increase, 1)
        loss = dqn.learn(mem)
        n_updates += 1
        if n_updates % 20 == 1:
            print(f"T {T:3d} update {n_updates:3d} loss {loss:.4f}")
        if T % args.target_update == 0:
            dqn.update_target_net()

dqn.online_net.eval()
with torch.no_grad():
    obs_all = torch.eye(args.chain_len)
    q = (dqn.online_net(obs_all) * dqn.support).sum(2)
print("greedy actions", q.argmax(1).tolist(), f"updates {n_updates}")

if args.out:
    torch.save({"online_net": dqn.online_net.state_dict(),
                "target_net": dqn.target_net.state_dict()}, args.out)
