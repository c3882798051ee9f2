"""Soft actor-critic, the first version with a separate state-value network, on a tiny 2-D
point-reaching task, written after Haarnoja, Zhou, Abbeel and Levine, "Soft Actor-Critic:
Off-Policy Maximum Entropy Deep Reinforcement Learning with a Stochastic Actor" (ICML 2018,
arXiv:1801.01290): a soft state-value network V(s) regressed on min_k Q_k(s, a~) - log pi(a~|s)
with a~ drawn from the current policy, two soft Q networks regressed on the fixed target
scale_reward * r + gamma * (1 - done) * V_target(s'), where V_target is a Polyak average of V,
and a tanh-squashed Gaussian policy trained with the reparameterisation trick to minimise
E[log pi(a~|s) - Q_1(s, a~)]. With the authors' code, haarnoja/sac (https://github.com/haarnoja/sac,
sac/algos/sac.py SAC: _init_critic_update builds ys = tf.stop_gradient(scale_reward * r +
(1 - terminal) * discount * vf_next_target) from the 'target' copy of the value function and
minimises 0.5 * mean((ys - Q_k)^2) for qf1 and qf2, each over its own variables;
_init_actor_update draws actions and log_pi from the policy (reparameterize=True), takes
min_log_target = min(Q_1, Q_2) at those actions, minimises the policy loss mean(log_pi - Q_1)
plus the Gaussian's regulariser over the policy's variables only, and 0.5 * mean((V -
tf.stop_gradient(min_log_target - log_pi))^2) over the value function's variables;
_init_target_ops assigns target <- (1 - tau) * target + tau * source after each step;
sac/distributions/normal.py clips log sigma to [-20, 2] and adds reg * 0.5 * (mean(log_sig^2) +
mean(mu^2)); sac/policies/gaussian_policy.py squashes with tanh and subtracts
sum log(1 - tanh(x)^2 + 1e-6)), whose steps this script follows. The TensorFlow graph runs all
updates on one feed; here they run one after another (Q networks, then V, then the policy, then
the Polyak step), each optimizer over its own network. The target V starts as a copy of V. The
task: parallel 2-D point masses that move by 0.2 a and are rewarded by minus the squared distance
to a goal, an episode ending (a terminal) within 0.1 of it and otherwise after 20 steps.
As published: clean."""

import argparse
import copy
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-envs", type=int, default=8)
parser.add_argument("--initial-random-steps", type=int, default=25)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.01)
parser.add_argument("--scale-reward", type=float, default=5.0)
parser.add_argument("--reg", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save V, its target, Q1, Q2 and the policy")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden, horizon = 2, 2, 64, 20
goal = torch.tensor([0.5, -0.5])
LOG_SIG_MIN, LOG_SIG_MAX, EPS = -20.0, 2.0, 1e-6


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_out))


class QFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(obs_dim + act_dim, 1)

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1)).squeeze(-1)


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)

    def forward(self, obs):
        """Squashed reparameterised sample, its log-likelihood and the regulariser."""
        mu, log_sig = self.net(obs).chunk(2, -1)
        log_sig = log_sig.clamp(LOG_SIG_MIN, LOG_SIG_MAX)
        dist = torch.distributions.Normal(mu, log_sig.exp())
        x_t = dist.rsample()
        action = torch.tanh(x_t)
        log_pi = dist.log_prob(x_t).sum(-1) - torch.log(1 - action ** 2 + EPS).sum(-1)
        reg_loss = args.reg * 0.5 * (log_sig.pow(2).mean() + mu.pow(2).mean())
        return action, log_pi, reg_loss


vf = mlp(obs_dim, 1)
vf_target = copy.deepcopy(vf)
qf1, qf2 = QFunction(), QFunction()
policy = GaussianPolicy()
q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=args.lr)
vf_optimizer = torch.optim.Adam(vf.parameters(), lr=args.lr)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)

# replay pool and parallel environments
pool_size = args.n_envs * (args.steps + args.initial_random_steps)
pool = {"obs": torch.zeros(pool_size, obs_dim), "act": torch.zeros(pool_size, act_dim),
        "rew": torch.zeros(pool_size), "next_obs": torch.zeros(pool_size, obs_dim),
        "done": torch.zeros(pool_size)}
pool_len = 0
obs = torch.rand(args.n_envs, obs_dim) * 2 - 1
t_env = torch.zeros(args.n_envs)


def env_step(action):
    """Moves every point mass, stores the transitions and resets finished episodes."""
    global obs, t_env, pool_len
    next_obs = (obs + 0.2 * action).clamp(-1.5, 1.5)
    dist2 = (next_obs - goal).pow(2).sum(-1)
    reward, done = -dist2, (dist2 < 0.01).float()
    idx = torch.arange(pool_len, pool_len + args.n_envs)
    for key, value in (("obs", obs), ("act", action), ("rew", reward), ("next_obs", next_obs),
                       ("done", done)):
        pool[key][idx] = value
    pool_len += args.n_envs
    t_env = t_env + 1
    reset = (done > 0) | (t_env >= horizon)
    obs = torch.where(reset.unsqueeze(1), torch.rand(args.n_envs, obs_dim) * 2 - 1, next_obs)
    t_env = torch.where(reset, torch.zeros_like(t_env), t_env)
    return reward


for _ in range(args.initial_random_steps):
    env_step(torch.rand(args.n_envs, act_dim) * 2 - 1)

for step in range(args.steps):
    with torch.no_grad():
        action, _, _ = policy(obs)
    reward = env_step(action)
    idx = torch.randint(0, pool_len, (args.batch_size,))
    b_obs, b_act, b_rew = pool["obs"][idx], pool["act"][idx], pool["rew"][idx]
    b_next_obs, b_done = pool["next_obs"][idx], pool["done"][idx]

    # soft Q-functions towards the fixed target from the target value network
    with torch.no_grad():
        ys = args.scale_reward * b_rew + (1 - b_done) * args.discount * vf_target(b_next_obs).squeeze(-1)
    td_loss1 = 0.5 * (ys - qf1(b_obs, b_act)).pow(2).mean()
    td_loss2 = 0.5 * (ys - qf2(b_obs, b_act)).pow(2).mean()
    q_optimizer.zero_grad()
    (td_loss1 + td_loss2).backward()
    q_optimizer.step()

    # soft value function and policy at actions drawn from the current policy
    new_action, log_pi, reg_loss = policy(b_obs)
    log_target1 = qf1(b_obs, new_action)
    log_target2 = qf2(b_obs, new_action)
    min_log_target = torch.min(log_target1, log_target2)
    vf_t = vf(b_obs).squeeze(-1)
    vf_loss = 0.5 * (vf_t - (min_log_target - log_pi).detach()).pow(2).mean()
    vf_optimizer.zero_grad()
    vf_loss.backward()
    vf_optimizer.step()

    policy_loss = (log_pi - log_target1).mean() + reg_loss
    policy_optimizer.zero_grad()
    policy_loss.backward()
    policy_optimizer.step()

    # Polyak average of the value network
    with torch.no_grad():
        for target_param, param in zip(vf_target.parameters(), vf.parameters()):
            target_param.mul_(1 - args.tau).add_(args.tau * param)

    if step % 50 == 0:
        print(f"step {step} reward {reward.mean().item():.3f} td {td_loss1.item():.4f} "
              f"vf {vf_loss.item():.4f} policy {policy_loss.item():.4f} log_pi {log_pi.mean().item():.3f}")

if args.out:
    torch.save({"vf": vf.state_dict(), "vf_target": vf_target.state_dict(), "qf1": qf1.state_dict(),
                "qf2": qf2.state_dict(), "policy": policy.state_dict()}, args.out)
