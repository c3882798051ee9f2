"""NoisyNet-DQN on a small chain MDP, written after Fortunato, Azar, Piot, Menick, Osband,
Graves, Mnih, Munos, Hassabis, Pietquin, Blundell and Legg, "Noisy Networks for Exploration"
(ICLR 2018, arXiv:1706.10295): every linear layer of the Q-network is a noisy layer, y =
(mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b, whose means mu and noise scales sigma are
both learned by gradient descent on the DQN loss, with factorised Gaussian noise eps_w = f(eps_out)
f(eps_in)^T, eps_b = f(eps_out), f(x) = sgn(x) sqrt(|x|), resampled between steps; the agent acts
greedily on the noisy Q-values (no epsilon-greedy), and the TD target r + gamma * max_b Q(s', b,
eps'; zeta^-) is taken from a periodically synchronised target network with its own independent
noise. With the public Rainbow implementation Kaixhin/Rainbow (https://github.com/Kaixhin/Rainbow,
model.py NoisyLinear: weight_mu, weight_sigma, bias_mu, bias_sigma as parameters and
weight_epsilon, bias_epsilon as buffers, reset_parameters with mu ~ U(-1/sqrt(in), 1/sqrt(in))
and sigma = std_init / sqrt(in) (sqrt(out) for the bias), _scale_noise and reset_noise for the
factorised noise, forward using mu + sigma * epsilon in training mode; agent.py Agent: the
target network is a copy of the online one loaded by update_target_net, act takes the argmax
under torch.no_grad(), learn resamples the target network's noise and computes the target
under torch.no_grad(), then zeroes, backpropagates and steps Adam over the online network's
parameters; main.py resets the online noise every replay_frequency steps and updates the
target network every target_update steps), whose steps this script follows with a plain
(non-distributional, one-step, uniform replay) Huber DQN loss, as in the paper's
NoisyNet-DQN. The chain has eight states with thermometer observations, a small reward at the
left end and a large one at the right end; the noise buffers are not saved (not persistent).
Bug: weight_sigma is registered as a buffer, not a parameter, so it is never learned."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--env-steps", type=int, default=400)
parser.add_argument("--learn-start", type=int, default=64)
parser.add_argument("--replay-frequency", type=int, default=2)
parser.add_argument("--target-update", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--noisy-std", type=float, default=0.5)
parser.add_argument("--discount", type=float, default=0.95)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the online and target networks")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny models: extra threads only add overhead

n_states, n_actions = 8, 2
horizon = n_states + 9


def observe(s):
    """Thermometer encoding of the chain position."""
    return (torch.arange(n_states) <= s).float()


def env_step(s, a):
    """Action 0 moves left, action 1 right; reward 0.01 at the left end, 1 at the right end."""
    s_next = max(s - 1, 0) if a == 0 else min(s + 1, n_states - 1)
    reward = 0.01 if (s_next == 0 and a == 0) else (1.0 if s_next == n_states - 1 else 0.0)
    return s_next, reward


class NoisyLinear(nn.Module):
    """Factorised-Gaussian noisy linear layer."""

    def __init__(self, in_features, out_features, std_init=0.5):
        super().__init__()
        self.in_features, self.out_features, self.std_init = in_features, out_features, std_init
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.register_buffer("weight_sigma", torch.empty(out_features, in_features))
        self.register_buffer("weight_epsilon", torch.empty(out_features, in_features),
                             persistent=False)
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("bias_epsilon", torch.empty(out_features), persistent=False)
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self):
        mu_range = 1 / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight_mu.uniform_(-mu_range, mu_range)
            self.weight_sigma.fill_(self.std_init / math.sqrt(self.in_features))
            self.bias_mu.uniform_(-mu_range, mu_range)
            self.bias_sigma.fill_(self.std_init / math.sqrt(self.out_features))

    @staticmethod
    def _scale_noise(size):
        x = torch.randn(size)
        return x.sign() * x.abs().sqrt()

    def reset_noise(self):
        epsilon_in = self._scale_noise(self.in_features)
        epsilon_out = self._scale_noise(self.out_features)
        self.weight_epsilon.copy_(torch.outer(epsilon_out, epsilon_in))
        self.bias_epsilon.copy_(epsilon_out)

    def forward(self, x):
        if self.training:
            return F.linear(x, self.weight_mu + self.weight_sigma * self.weight_epsilon,
                            self.bias_mu + self.bias_sigma * self.bias_epsilon)
        return F.linear(x, self.weight_mu, self.bias_mu)


class NoisyDQN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc_h = NoisyLinear(n_states, args.hidden, args.noisy_std)
        self.fc_q = NoisyLinear(args.hidden, n_actions, args.noisy_std)

    def forward(self, x):
        return self.fc_q(F.relu(self.fc_h(x)))

    def reset_noise(self):
        self.fc_h.reset_noise()
        self.fc_q.reset_noise()


online_net = NoisyDQN()
target_net = copy.deepcopy(online_net)
optimizer = torch.optim.Adam(online_net.parameters(), lr=args.lr, eps=1.5e-4)

# uniform replay memory, large enough for the whole run
mem_states = torch.zeros(args.env_steps, n_states)
mem_actions = torch.zeros(args.env_steps, dtype=torch.long)
mem_rewards = torch.zeros(args.env_steps)
mem_next_states = torch.zeros(args.env_steps, n_states)
mem_nonterminals = torch.zeros(args.env_steps)

s, t_in_episode, episode_return, returns = 1, 0, 0.0, []
for T in range(args.env_steps):
    if T % args.replay_frequency == 0:
        online_net.reset_noise()  # draw a new set of noisy weights for acting
    state = observe(s)
    with torch.no_grad():
        action = online_net(state.unsqueeze(0)).argmax(1).item()
    s_next, reward = env_step(s, action)
    t_in_episode += 1
    done = t_in_episode == horizon
    mem_states[T], mem_actions[T], mem_rewards[T] = state, action, reward
    mem_next_states[T], mem_nonterminals[T] = observe(s_next), float(not done)
    episode_return += reward
    s = s_next
    if done:
        returns.append(episode_return)
        s, t_in_episode, episode_return = 1, 0, 0.0

    if T >= args.learn_start and T % args.replay_frequency == 0:
        idx = torch.randint(0, T + 1, (args.batch_size,))
        states, actions, rewards = mem_states[idx], mem_actions[idx], mem_rewards[idx]
        next_states, nonterminals = mem_next_states[idx], mem_nonterminals[idx]
        with torch.no_grad():
            target_net.reset_noise()  # independent noise for the target network
            next_q = target_net(next_states).max(1).values
            target = rewards + args.discount * nonterminals * next_q
        q = online_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    if T % args.target_update == 0:
        target_net.load_state_dict(online_net.state_dict())

print(f"episode returns {[round(r, 2) for r in returns]}")
sigma = online_net.fc_h.weight_sigma.abs().mean().item()
print(f"final loss {loss.item():.4f} mean |sigma| of the first layer {sigma:.4f}")

if args.out:
    torch.save({"online_net": online_net.state_dict(), "target_net": target_net.state_dict()},
               args.out)
