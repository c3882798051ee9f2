"""Probabilistic embeddings for actor-critic meta-RL (PEARL) at a tiny size, written after Rakelly,
Zhou, Quillen, Finn and Levine, "Efficient Off-Policy Meta-Reinforcement Learning via
Probabilistic Context Variables" (ICML 2019, arXiv:1903.08254), algorithm 1, with
katerakelly/oyster (https://github.com/katerakelly/oyster, rlkit/torch/sac/agent.py PEARLAgent:
infer_posterior, the product of the per-transition Gaussian factors, sample_z with rsample,
compute_kl_div against the unit prior, and forward, whose policy reads torch.cat([obs,
task_z.detach()]); rlkit/torch/sac/sac.py PEARLSoftActorCritic._take_step: the encoder gets
gradients only from the Q functions and the KL, so the value function reads task_z.detach(),
the target value is computed under torch.no_grad(), context_optimizer.zero_grad() comes before
kl_loss.backward(retain_graph=True), the Q losses' backward follows and the context optimizer
steps after the Q optimizers; _min_q reads task_z.detach(); the value function's target and
the policy's loss through min(Q1, Q2); _update_target_network, a polyak average of vf). Two
phases: random actions fill one replay buffer per training task, then meta-training steps,
each on a meta-batch of tasks with a context batch and an RL batch from each task's buffer.
Point-goal tasks made in the script: the goal, on a circle, is seen only through rewards.
Bug: context_optimizer.zero_grad() is called beside the Q optimizers' zero_grad, after
kl_loss.backward(retain_graph=True) (oyster's _take_step clears the context optimizer before the
KL's backward), so the KL's gradient is erased before the encoder's step: the context encoder is
trained by the Q losses alone and the information bottleneck on q(z | c) is lost."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--num-tasks", type=int, default=4)
parser.add_argument("--initial-steps", type=int, default=40, help="random steps per task")
parser.add_argument("--iterations", type=int, default=20)
parser.add_argument("--meta-batch", type=int, default=2)
parser.add_argument("--context-size", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--kl-lambda", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, latent_dim, hidden_dim, episode_len = 2, 2, 2, 32, 8
discount, reward_scale, tau, reg_weight = 0.9, 5.0, 0.05, 1e-3
angles = 2 * math.pi * torch.arange(args.num_tasks) / args.num_tasks
goals = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, n_out))


context_encoder = mlp(obs_dim + act_dim + 1, 2 * latent_dim)
policy = mlp(obs_dim + latent_dim, 2 * act_dim)
qf1, qf2 = mlp(obs_dim + act_dim + latent_dim, 1), mlp(obs_dim + act_dim + latent_dim, 1)
vf = mlp(obs_dim + latent_dim, 1)
target_vf = copy.deepcopy(vf)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
qf1_optimizer = torch.optim.Adam(qf1.parameters(), lr=args.lr)
qf2_optimizer = torch.optim.Adam(qf2.parameters(), lr=args.lr)
vf_optimizer = torch.optim.Adam(vf.parameters(), lr=args.lr)
context_optimizer = torch.optim.Adam(context_encoder.parameters(), lr=args.lr)


def infer_posterior(context):
    """q(z | c) as the product of one Gaussian factor per transition; z drawn with rsample."""
    params = context_encoder(context)
    mu, sigma_squared = params[..., :latent_dim], F.softplus(params[..., latent_dim:])
    sigma_squared = sigma_squared.clamp(min=1e-7)
    z_vars = 1.0 / (1.0 / sigma_squared).sum(dim=1)
    z_means = z_vars * (mu / sigma_squared).sum(dim=1)
    z = torch.distributions.Normal(z_means, z_vars.sqrt()).rsample()
    prior = torch.distributions.Normal(torch.zeros(latent_dim), torch.ones(latent_dim))
    posterior = torch.distributions.Normal(z_means, z_vars.sqrt())
    return z, torch.distributions.kl_divergence(posterior, prior).sum()


def run_policy(obs, task_z):
    mean, log_std = policy(torch.cat([obs, task_z], dim=-1)).chunk(2, dim=-1)
    log_std = log_std.clamp(-5, 2)
    normal = torch.distributions.Normal(mean, log_std.exp())
    pre_tanh = normal.rsample()
    action = torch.tanh(pre_tanh)
    log_prob = normal.log_prob(pre_tanh) - torch.log(1 - action.pow(2) + 1e-6)
    return action, log_prob.sum(-1, keepdim=True), mean, log_std


# phase 1: random actions fill each task's buffer
buffers = []
for task in range(args.num_tasks):
    rows, obs = [], torch.zeros(obs_dim)
    for step in range(args.initial_steps):
        action = 2 * torch.rand(act_dim) - 1
        next_obs = (obs + 0.25 * action).clamp(-1.5, 1.5)
        reward = -(next_obs - goals[task]).norm().view(1)
        rows.append(torch.cat([obs, action, reward, next_obs]))
        obs = torch.zeros(obs_dim) if (step + 1) % episode_len == 0 else next_obs
    buffers.append(torch.stack(rows))


def sample(indices, size):
    rows = torch.stack([buffers[i][torch.randint(0, args.initial_steps, (size,))]
                        for i in indices])
    return rows.split([obs_dim, act_dim, 1, obs_dim], dim=-1)


# phase 2: meta-training steps
for it in range(args.iterations):
    indices = torch.randperm(args.num_tasks)[:args.meta_batch].tolist()
    c_obs, c_act, c_rew, _ = sample(indices, args.context_size)
    z, kl_div = infer_posterior(torch.cat([c_obs, c_act, c_rew], dim=-1))
    obs, actions, rewards, next_obs = (x.reshape(-1, x.shape[-1])
                                       for x in sample(indices, args.batch_size))
    task_z = z.repeat_interleave(args.batch_size, dim=0)
    new_actions, log_pi, policy_mean, policy_log_std = run_policy(obs, task_z.detach())

    q1_pred = qf1(torch.cat([obs, actions, task_z], dim=-1))
    q2_pred = qf2(torch.cat([obs, actions, task_z], dim=-1))
    v_pred = vf(torch.cat([obs, task_z.detach()], dim=-1))
    with torch.no_grad():
        target_v_values = target_vf(torch.cat([next_obs, task_z], dim=-1))

    kl_loss = args.kl_lambda * kl_div
    kl_loss.backward(retain_graph=True)
    context_optimizer.zero_grad()
    qf1_optimizer.zero_grad()
    qf2_optimizer.zero_grad()
    q_target = rewards * reward_scale + discount * target_v_values
    qf_loss = ((q1_pred - q_target) ** 2).mean() + ((q2_pred - q_target) ** 2).mean()
    qf_loss.backward()
    qf1_optimizer.step()
    qf2_optimizer.step()
    context_optimizer.step()

    sa_new = torch.cat([obs, new_actions, task_z.detach()], dim=-1)
    min_q_new_actions = torch.min(qf1(sa_new), qf2(sa_new))
    vf_loss = F.mse_loss(v_pred, (min_q_new_actions - log_pi).detach())
    vf_optimizer.zero_grad()
    vf_loss.backward()
    vf_optimizer.step()
    with torch.no_grad():
        for p, p_target in zip(vf.parameters(), target_vf.parameters()):
            p_target.mul_(1 - tau).add_(tau * p)

    policy_loss = (log_pi - min_q_new_actions).mean()
    policy_loss = policy_loss + reg_weight * (policy_mean.pow(2).mean()
                                              + policy_log_std.pow(2).mean())
    policy_optimizer.zero_grad()
    policy_loss.backward()
    policy_optimizer.step()
    print(f"it {it} kl {kl_div.item():.4f} qf {qf_loss.item():.4f} vf {vf_loss.item():.4f} "
          f"policy {policy_loss.item():.4f}")

if args.out:
    nets = {"context_encoder": context_encoder, "policy": policy, "qf1": qf1, "qf2": qf2,
            "vf": vf, "target_vf": target_vf}
    torch.save({f"{name}.{k}": v for name, net in nets.items()
                for k, v in net.state_dict().items()}, args.out)
