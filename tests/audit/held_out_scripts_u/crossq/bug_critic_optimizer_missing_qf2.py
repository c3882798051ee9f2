"""CrossQ, soft actor-critic without target networks and with batch normalisation in the critic,
on a tiny pendulum swing-up simulated in torch, written after Bhatt, Palenicek, Belousov, Argus,
Amiranashvili, Brox and Peters, "CrossQ: Batch Normalization in Deep Reinforcement Learning for
Greater Sample Efficiency and Simplicity" (ICLR 2024, arXiv:1902.05605): the critic normalises
its input and every hidden layer with batch norm, and there is no target network; instead the
current pairs (s, a) and the next pairs (s', a'), a' ~ pi(s'), go through the critic in one
joint forward pass over their concatenation, so that both halves are normalised with the same
batch statistics, and the next-state half is split off, its Q values cut from the graph, to
form the soft TD target. With the authors' code (https://github.com/adityab/CrossQ,
sbx/sac/sac.py SAC.update_critic: the next action and its log-probability from the
actor with train=False, then with crossq_style the critic applied in train mode to the
concatenated observations and actions, jnp.split of the output into current_q_values and
next_q_values, the minimum over the critics, minus ent_coef times the log-probability, the TD
target under jax.lax.stop_gradient and the loss 0.5 * squared error, mean over the batch, sum
over the critics; SAC.update_actor with the critic in eval mode (train=False, its running
statistics), actor loss mean(ent_coef * log_prob - min Q); update_temperature on ent_coef *
(entropy - target_entropy) with the entropy a fixed number; _train with policy_delay;
sbx/sac/policies.py Critic and Actor: BatchNorm (or its BatchRenorm, identical to batch norm
during its first 100k warm-up steps) on the input and after each hidden layer, tanh-squashed
Gaussian actor; train.py's crossq settings: policy_delay 3, Adam with b1 = 0.5, batch norm
momentum 0.99, tau 1, two critics), whose steps this script follows. Uniformly random actions
fill the buffer for learning_starts steps first. Here the networks have 64 units (the paper's
critics have 2048) and the pendulum is that of Gymnasium's Pendulum-v1 with 50-step episodes.
Bug: the critic optimizer is built over qf1's parameters only, so the second critic's
weights are never stepped (its batch-norm statistics still move), and min(Q1, Q2) reads an
untrained qf2."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=250, help="environment steps")
parser.add_argument("--learning-starts", type=int, default=100)
parser.add_argument("--episode-len", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--adam-b1", type=float, default=0.5)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--policy-delay", type=int, default=3)
parser.add_argument("--bn-momentum", type=float, default=0.99)
parser.add_argument("--out", default=None, help="where to save the actor, critics and temperature")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: intra-op threads only add overhead

obs_dim, act_dim, hidden = 3, 1, 64


def pendulum_reset():
    return torch.stack([(torch.rand(()) * 2 - 1) * math.pi, torch.rand(()) * 2 - 1])


def pendulum_obs(state):
    return torch.stack([state[0].cos(), state[0].sin(), state[1]])


def pendulum_step(state, action):
    th, thdot = state[0], state[1]
    u = 2.0 * action[0]
    angle = (th + math.pi) % (2 * math.pi) - math.pi
    reward = -(angle ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2)
    thdot = (thdot + (3 * 10.0 / 2 * th.sin() + 3.0 * u) * 0.05).clamp(-8, 8)
    return torch.stack([th + thdot * 0.05, thdot]), reward


def batch_norm(n):
    return nn.BatchNorm1d(n, momentum=1 - args.bn_momentum)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(batch_norm(obs_dim + act_dim),
                                 nn.Linear(obs_dim + act_dim, hidden), nn.ReLU(), batch_norm(hidden),
                                 nn.Linear(hidden, hidden), nn.ReLU(), batch_norm(hidden),
                                 nn.Linear(hidden, 1))

    def forward(self, obs, action):
        return self.net(torch.cat([obs, action], -1))


class Actor(nn.Module):
    def __init__(self, log_std_min=-20.0, log_std_max=2.0):
        super().__init__()
        self.trunk = nn.Sequential(batch_norm(obs_dim), nn.Linear(obs_dim, hidden), nn.ReLU(),
                                   batch_norm(hidden), nn.Linear(hidden, hidden), nn.ReLU(),
                                   batch_norm(hidden))
        self.mean, self.log_std = nn.Linear(hidden, act_dim), nn.Linear(hidden, act_dim)
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(self, obs):
        h = self.trunk(obs)
        mean, log_std = self.mean(h), self.log_std(h).clamp(self.log_std_min, self.log_std_max)
        std = log_std.exp()
        pre_tanh = mean + std * torch.randn_like(mean)
        action = torch.tanh(pre_tanh)
        log_prob = (-0.5 * ((pre_tanh - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
                    - torch.log(1 - action.pow(2) + 1e-6)).sum(-1, keepdim=True)
        return action, log_prob


actor, qf1, qf2 = Actor(), Critic(), Critic()
log_ent_coef = torch.zeros((), requires_grad=True)
target_entropy = -float(act_dim)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr, betas=(args.adam_b1, 0.999))
critic_optimizer = torch.optim.Adam(qf1.parameters(), lr=args.lr,
                                    betas=(args.adam_b1, 0.999))
ent_coef_optimizer = torch.optim.Adam([log_ent_coef], lr=args.lr)

buffer_obs = torch.zeros(args.steps, obs_dim)
buffer_next_obs = torch.zeros(args.steps, obs_dim)
buffer_action = torch.zeros(args.steps, act_dim)
buffer_reward = torch.zeros(args.steps, 1)
buffer_done = torch.zeros(args.steps, 1)  # time-limit ends only: always bootstrap

state = pendulum_reset()
n_updates, episode_return = 0, 0.0
for t in range(args.steps):
    if t > 0 and t % args.episode_len == 0:
        print(f"step {t} episode return {episode_return:.2f}")
        state, episode_return = pendulum_reset(), 0.0
    obs = pendulum_obs(state)
    if t < args.learning_starts:
        action = torch.rand(act_dim) * 2 - 1
    else:
        actor.eval()
        with torch.no_grad():
            action = actor(obs.unsqueeze(0))[0].squeeze(0)
    state, reward = pendulum_step(state, action)
    buffer_obs[t], buffer_action[t], buffer_reward[t] = obs, action, reward
    buffer_next_obs[t] = pendulum_obs(state)
    episode_return += reward.item()
    if t < args.learning_starts:
        continue

    idx = torch.randint(0, t + 1, (args.batch_size,))
    observations, actions, rewards = buffer_obs[idx], buffer_action[idx], buffer_reward[idx]
    next_observations, dones = buffer_next_obs[idx], buffer_done[idx]

    # critic: one joint forward of (s, a) and (s', a') through each batch-normalised critic
    ent_coef = log_ent_coef.exp().detach()
    actor.eval()
    with torch.no_grad():
        next_actions, next_log_prob = actor(next_observations)
    qf1.train()
    qf2.train()
    all_obs = torch.cat([observations, next_observations], 0)
    all_actions = torch.cat([actions, next_actions], 0)
    q1, next_q1 = qf1(all_obs, all_actions).split(args.batch_size, 0)
    q2, next_q2 = qf2(all_obs, all_actions).split(args.batch_size, 0)
    next_q = torch.min(next_q1, next_q2) - ent_coef * next_log_prob
    target_q = (rewards + (1 - dones) * args.gamma * next_q).detach()
    critic_loss = 0.5 * ((target_q - q1) ** 2).mean() + 0.5 * ((target_q - q2) ** 2).mean()
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    n_updates += 1

    # actor and entropy coefficient, every policy_delay critic updates
    if n_updates % args.policy_delay == 0:
        actor.train()
        qf1.eval()
        qf2.eval()
        actions_pi, log_prob = actor(observations)
        min_qf_pi = torch.min(qf1(observations, actions_pi), qf2(observations, actions_pi))
        actor_loss = (ent_coef * log_prob - min_qf_pi).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        entropy = -log_prob.detach().mean()
        ent_coef_loss = log_ent_coef.exp() * (entropy - target_entropy)
        ent_coef_optimizer.zero_grad()
        ent_coef_loss.backward()
        ent_coef_optimizer.step()

if args.out:
    torch.save({"actor": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict(),
                "log_ent_coef": log_ent_coef.detach().clone()}, args.out)
