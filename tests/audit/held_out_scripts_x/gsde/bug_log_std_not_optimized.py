"""A2C with generalized State-Dependent Exploration (gSDE) on a synthetic 2-D reaching task,
written after Raffin, Kober and Stulp, "Smooth Exploration for Robotic Reinforcement Learning"
(CoRL 2021, arXiv:2005.05719): instead of independent Gaussian noise at every step, the
exploration noise is a function of the state, eps(s) = z(s) theta_eps, with z(s) the policy's
last hidden features and theta_eps a matrix drawn from N(0, sigma^2) and kept for n steps, so
that exploration is smooth in time; the action is a = mu(s) + eps(s), hence a | s is Gaussian
with mean mu(s) and variance sum_j z_j(s)^2 sigma_j^2, and sigma (log_std, one per feature
and action) is learned through the policy gradient of that log-likelihood while the features
z are treated as constants in the variance (no gradient from the noise into the features).
With the authors' code, DLR-RM/stable-baselines3 (https://github.com/DLR-RM/stable-baselines3,
stable_baselines3/common/distributions.py StateDependentNoiseDistribution with full_std=True,
use_expln=False, learn_features=False: sample_weights draws exploration_matrices (one per
env) from N(0, exp(log_std)); proba_distribution detaches latent_sde and builds
Normal(mean_actions, sqrt(latent_sde^2 @ std^2 + eps)); get_noise multiplies the detached
features by the matrix; common/on_policy_algorithm.py OnPolicyAlgorithm.collect_rollouts
resamples the matrices at the start of a rollout and every sde_sample_freq steps and acts
under th.no_grad(); common/buffers.py RolloutBuffer.compute_returns_and_advantage (GAE);
a2c/a2c.py A2C.train: policy_loss = -(advantages * log_prob).mean(), value_loss =
mse(returns, values), loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss,
zero_grad, backward, clip_grad_norm_(max_grad_norm), RMSprop(alpha=0.99, eps=1e-5) over all
the policy's parameters, log_std included; common/policies.py ActorCriticPolicy, whose
latent_sde is latent_pi, with orthogonal initialisation), whose steps this script follows.
The task: 8 parallel episodes of 16 steps, the state is the position p in [-1, 1]^2 and the
elapsed fraction of the episode, p' = p + 0.2 clip(a, -1, 1), reward -|p'|; the networks
are 32-unit tanh MLPs, n_steps = 8 per update, sde_sample_freq = 4, log_std_init = -2.
Bug: log_std is left out of the optimizer's parameter list, so the exploration scale sigma
of the gSDE noise never adapts and stays at log_std_init."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=60)
parser.add_argument("--n-envs", type=int, default=8)
parser.add_argument("--n-steps", type=int, default=8)
parser.add_argument("--sde-sample-freq", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--gae-lambda", type=float, default=1.0)
parser.add_argument("--ent-coef", type=float, default=0.0)
parser.add_argument("--vf-coef", type=float, default=0.5)
parser.add_argument("--max-grad-norm", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the actor, critic and log_std")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, latent_dim, horizon = 3, 2, 32, 16


class ReachEnv:
    """n parallel episodes of reaching the origin; resets a finished episode in place."""

    def __init__(self, n):
        self.p, self.t = torch.rand(n, 2) * 2 - 1, torch.zeros(n)

    def obs(self):
        return torch.cat([self.p, (self.t / horizon).unsqueeze(1)], 1)

    def step(self, action):
        self.p = self.p + 0.2 * action.clamp(-1, 1)
        self.t = self.t + 1
        reward = -self.p.norm(dim=1)
        done = self.t >= horizon
        self.p = torch.where(done.unsqueeze(1), torch.rand_like(self.p) * 2 - 1, self.p)
        self.t = torch.where(done, torch.zeros_like(self.t), self.t)
        return self.obs(), reward, done.float()


actor = nn.Sequential(nn.Linear(obs_dim, latent_dim), nn.Tanh(),
                      nn.Linear(latent_dim, latent_dim), nn.Tanh())  # latent_pi = latent_sde
action_net = nn.Linear(latent_dim, act_dim)
log_std = nn.Parameter(torch.full((latent_dim, act_dim), -2.0))
critic = nn.Sequential(nn.Linear(obs_dim, latent_dim), nn.Tanh(),
                       nn.Linear(latent_dim, latent_dim), nn.Tanh(), nn.Linear(latent_dim, 1))
for module, gain in [(actor, math.sqrt(2)), (critic[:4], math.sqrt(2)), (action_net, 0.01),
                     (critic[4], 1.0)]:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.orthogonal_(m.weight, gain=gain)
            nn.init.zeros_(m.bias)

params = [*actor.parameters(), *action_net.parameters(), *critic.parameters()]
optimizer = torch.optim.RMSprop(params, lr=args.lr, alpha=0.99, eps=1e-5, weight_decay=0)


def sample_exploration_matrices(n):
    """theta_eps ~ N(0, exp(log_std)^2), one matrix per parallel env."""
    with torch.no_grad():
        return torch.randn(n, latent_dim, act_dim) * log_std.exp()


def gsde_distribution(latent, mean_actions):
    """The Gaussian of a | s under gSDE: variance z(s)^2 @ sigma^2, features as constants."""
    latent_sde = latent.detach()  # learn_features=False
    variance = latent_sde ** 2 @ log_std.exp() ** 2
    return Normal(mean_actions, torch.sqrt(variance + 1e-6))


env = ReachEnv(args.n_envs)
obs = env.obs()
for update in range(args.updates):
    # collect a rollout with the current policy, resampling the noise every sde_sample_freq steps
    b_obs, b_actions, b_rewards, b_dones, b_values = [], [], [], [], []
    for n in range(args.n_steps):
        if n % args.sde_sample_freq == 0:
            exploration_matrices = sample_exploration_matrices(args.n_envs)
        with torch.no_grad():
            latent = actor(obs)
            noise = torch.bmm(latent.unsqueeze(1), exploration_matrices).squeeze(1)
            action = action_net(latent) + noise
            value = critic(obs).squeeze(1)
        next_obs, reward, done = env.step(action)
        b_obs.append(obs)
        b_actions.append(action)
        b_rewards.append(reward)
        b_dones.append(done)
        b_values.append(value)
        obs = next_obs
    with torch.no_grad():
        last_value = critic(obs).squeeze(1)

    # GAE(lambda) advantages and TD(lambda) returns
    advantages = torch.zeros(args.n_steps, args.n_envs)
    last_gae = torch.zeros(args.n_envs)
    for n in reversed(range(args.n_steps)):
        next_value = last_value if n == args.n_steps - 1 else b_values[n + 1]
        next_non_terminal = 1.0 - b_dones[n]
        delta = b_rewards[n] + args.gamma * next_value * next_non_terminal - b_values[n]
        last_gae = delta + args.gamma * args.gae_lambda * next_non_terminal * last_gae
        advantages[n] = last_gae
    returns = advantages + torch.stack(b_values)

    # one A2C update on the whole rollout
    flat_obs = torch.cat(b_obs)
    latent = actor(flat_obs)
    dist = gsde_distribution(latent, action_net(latent))
    log_prob = dist.log_prob(torch.cat(b_actions)).sum(1)
    values = critic(flat_obs).squeeze(1)
    policy_loss = -(advantages.flatten() * log_prob).mean()
    value_loss = F.mse_loss(returns.flatten(), values)
    entropy_loss = -dist.entropy().sum(1).mean()
    loss = policy_loss + args.ent_coef * entropy_loss + args.vf_coef * value_loss
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
    optimizer.step()
    if update % 20 == 0:
        print(f"update {update} mean reward {torch.stack(b_rewards).mean().item():.4f} "
              f"value loss {value_loss.item():.4f} std {log_std.exp().mean().item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "action_net": action_net.state_dict(),
                "critic": critic.state_dict(), "log_std": log_std.detach().clone()}, args.out)
