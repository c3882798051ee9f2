"""Truncated Quantile Critics (TQC) on a tiny goal-reaching point mass simulated in torch, written
after Kuznetsov, Shvechikov, Grishin and Vetrov, "Controlling Overestimation Bias with Truncated
Mixture of Continuous Distributional Quantile Critics" (ICML 2020, arXiv:2005.04269): an
ensemble of N distributional critics, each predicting M quantiles of the return; the target
distribution pools the N * M atoms of the target critics at the next state and the policy's
next action, sorts them and drops the top k * N (k per critic) to control overestimation,
subtracts alpha log pi and discounts; every critic's quantiles are fitted to the kept atoms with
the quantile Huber loss; the actor maximises the mean of all atoms minus alpha log pi as in SAC,
with the entropy temperature alpha tuned towards a target entropy of -dim(A); the target
critics are a Polyak average of the critics. With the authors' code, SamsungLabs/tqc_pytorch
(https://github.com/SamsungLabs/tqc_pytorch, tqc/trainer.py Trainer.train: under torch.no_grad()
the next action and log-probability, next_z of the target critic, torch.sort of the reshaped
batch x (nets * quantiles) atoms, the first quantiles_total - top_quantiles_to_drop kept, target
= reward + not_done * discount * (sorted_z_part - alpha * next_log_pi); critic_loss =
quantile_huber_loss_f(cur_z, target); alpha_loss = -log_alpha * (log_pi +
target_entropy).detach().mean(); actor_loss = (alpha * log_pi - critic(state,
new_action).mean(2).mean(1)).mean(); then zero_grad, backward and step of the critic, the
Polyak update of the target with tau, and the same for the actor and for log_alpha;
tqc/functions.py quantile_huber_loss_f with the midpoint fractions (2i + 1) / 2M;
tqc/structures.py Critic, an ensemble of MLPs stacked into batch x nets x quantiles, Actor with
a tanh-Normal policy; main.py: actions from the policy from the start, training once per step
once batch_size transitions are stored, top_quantiles_to_drop_per_net times n_nets dropped),
whose steps this script follows. The policy and temperature losses are formed after the
critic's step here (the reference forms them before it and backpropagates after it, which
recent PyTorch rejects since the step changes the critic's weights in place). Here 3 critics
of 12 quantiles with one atom dropped per critic, networks of two 64-unit hidden layers and a
batch of 64 (the reference: 5 critics of 25 quantiles, 2 dropped per critic, 512 units, 256).
As published: clean."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=180, help="environment steps")
parser.add_argument("--episode-len", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-nets", type=int, default=3)
parser.add_argument("--n-quantiles", type=int, default=12)
parser.add_argument("--top-quantiles-to-drop-per-net", type=int, default=1)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=0.005)
parser.add_argument("--lr", type=float, default=3e-4)
parser.add_argument("--out", default=None, help="where to save the actor, critics and log_alpha")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: intra-op threads only add overhead

state_dim, action_dim, hidden = 6, 2, 64


def env_reset():
    """Position, velocity and goal of a point mass; the goal is part of the observation."""
    return torch.cat([torch.rand(2) * 2 - 1, torch.zeros(2), torch.rand(2) * 2 - 1])


def env_step(state, action):
    pos, vel, goal = state[:2], state[2:4], state[4:]
    vel = 0.8 * vel + 0.25 * action
    pos = (pos + 0.1 * vel).clamp(-1.5, 1.5)
    reward = -(pos - goal).norm() - 0.02 * action.pow(2).sum()
    return torch.cat([pos, vel, goal]), reward


def mlp(in_size, out_size):
    return nn.Sequential(nn.Linear(in_size, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out_size))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.nets = nn.ModuleList(mlp(state_dim + action_dim, args.n_quantiles) for _ in range(args.n_nets))

    def forward(self, state, action):
        sa = torch.cat([state, action], dim=1)
        return torch.stack([net(sa) for net in self.nets], dim=1)  # batch x nets x quantiles


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(state_dim, 2 * action_dim)

    def forward(self, obs):
        mean, log_std = self.net(obs).split([action_dim, action_dim], dim=1)
        std = log_std.clamp(-20, 2).exp()
        pre_tanh = mean + std * torch.randn_like(mean)
        log_det = 2 * math.log(2) + F.logsigmoid(2 * pre_tanh) + F.logsigmoid(-2 * pre_tanh)
        log_prob = torch.distributions.Normal(mean, std).log_prob(pre_tanh) - log_det
        return torch.tanh(pre_tanh), log_prob.sum(dim=1, keepdim=True)


def quantile_huber_loss(quantiles, samples):
    pairwise_delta = samples[:, None, None, :] - quantiles[:, :, :, None]  # batch x nets x quantiles x samples
    abs_pairwise_delta = torch.abs(pairwise_delta)
    huber_loss = torch.where(abs_pairwise_delta > 1, abs_pairwise_delta - 0.5, pairwise_delta ** 2 * 0.5)
    n_quantiles = quantiles.shape[2]
    tau = torch.arange(n_quantiles).float() / n_quantiles + 1 / 2 / n_quantiles
    return (torch.abs(tau[None, None, :, None] - (pairwise_delta < 0).float()) * huber_loss).mean()


actor, critic = Actor(), Critic()
critic_target = copy.deepcopy(critic)
log_alpha = torch.zeros((1,), requires_grad=True)
target_entropy = -float(action_dim)
quantiles_total = args.n_quantiles * args.n_nets
top_quantiles_to_drop = args.top_quantiles_to_drop_per_net * args.n_nets
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
alpha_optimizer = torch.optim.Adam([log_alpha], lr=args.lr)

buffer = {"state": torch.zeros(args.steps, state_dim), "action": torch.zeros(args.steps, action_dim),
          "next_state": torch.zeros(args.steps, state_dim), "reward": torch.zeros(args.steps, 1),
          "not_done": torch.ones(args.steps, 1)}  # time-limit ends only: always bootstrap

env_state = env_reset()
episode_return = 0.0
for t in range(args.steps):
    if t > 0 and t % args.episode_len == 0:
        print(f"step {t} episode return {episode_return:.2f}")
        env_state, episode_return = env_reset(), 0.0
    with torch.no_grad():
        env_action = actor(env_state.unsqueeze(0))[0].squeeze(0)
    next_env_state, env_reward = env_step(env_state, env_action)
    for key, value in zip(buffer, (env_state, env_action, next_env_state, env_reward, 1.0)):
        buffer[key][t] = value
    env_state = next_env_state
    episode_return += env_reward.item()
    if t < args.batch_size:
        continue

    idx = torch.randint(0, t + 1, (args.batch_size,))
    state, action, next_state, reward, not_done = (buffer[key][idx] for key in buffer)
    alpha = torch.exp(log_alpha)

    # --- critic: truncated mixture of the target critics' quantiles ---
    with torch.no_grad():
        new_next_action, next_log_pi = actor(next_state)
        next_z = critic_target(next_state, new_next_action)
        sorted_z, _ = torch.sort(next_z.reshape(args.batch_size, -1))
        sorted_z_part = sorted_z[:, :quantiles_total - top_quantiles_to_drop]
        target = reward + not_done * args.discount * (sorted_z_part - alpha * next_log_pi)
    cur_z = critic(state, action)
    critic_loss = quantile_huber_loss(cur_z, target)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    for param, target_param in zip(critic.parameters(), critic_target.parameters()):
        target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)

    # --- actor and temperature ---
    new_action, log_pi = actor(state)
    alpha_loss = -log_alpha * (log_pi + target_entropy).detach().mean()
    actor_loss = (alpha * log_pi - critic(state, new_action).mean(2).mean(1, keepdim=True)).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    alpha_optimizer.zero_grad()
    alpha_loss.backward()
    alpha_optimizer.step()

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "critic_target": critic_target.state_dict(), "log_alpha": log_alpha.detach().clone()},
               args.out)
