"""PPO-Lagrangian at a tiny size, written after Ray, Achiam and Amodei, "Benchmarking Safe
Exploration in Deep Reinforcement Learning" (OpenAI, 2019; openai/safety-starter-agents,
https://github.com/openai/safety-starter-agents, safe_rl/pg/algos.py and safe_rl/pg/agents.py) with
the PyTorch code of PKU-Alignment/omnisafe (https://github.com/PKU-Alignment/omnisafe,
omnisafe/common/lagrange.py Lagrange, omnisafe/algorithms/on_policy/naive_lagrange/ppo_lag.py
PPOLag, omnisafe/algorithms/on_policy/base/policy_gradient.py). The Lagrange multiplier is a scalar
parameter with an optimizer of its own, trained first in each update on
``-lambda * (Jc - cost_limit)`` with the mean episode cost ``Jc`` a number read from the rollouts,
then clamped to be non-negative; the clipped PPO objective then reads the advantage
``(A_r - lambda * A_c) / (1 + lambda)`` with lambda taken by ``.item()``, a constant; a value
network for the rewards and one for the costs regress onto the discounted returns. All optimizers
clear their gradients after their step (backward, step, zero_grad). Episodes of a few steps of a
contextual three-armed bandit made in the script, whose best-paying arm costs. Injected bug: the
penalty in the policy's advantage is the multiplier itself, not its ``.item()``, so each policy
backward leaves on the multiplier the gradient of the policy loss, which the multiplier's next step
(cleared only after its step) adds to the gradient of its own loss."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=5)
parser.add_argument("--update-iters", type=int, default=4)
parser.add_argument("--episodes", type=int, default=32)
parser.add_argument("--horizon", type=int, default=6)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--clip", type=float, default=0.2)
parser.add_argument("--cost-limit", type=float, default=1.5)
parser.add_argument("--lambda-init", type=float, default=0.001)
parser.add_argument("--lambda-lr", type=float, default=0.035)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, n_actions, hidden = 4, 3, 32
reward_map = torch.randn(obs_dim, n_actions)
arm_bonus = torch.tensor([0.0, 0.3, 1.0])  # the last arm pays best
arm_cost = torch.tensor([0.0, 0.1, 0.6])  # and costs most


def rollout(actor):
    """Episodes of ``horizon`` steps; the state is drawn afresh each step."""
    obs = torch.randn(args.episodes, args.horizon, obs_dim)
    with torch.no_grad():
        dist = torch.distributions.Categorical(logits=actor(obs))
        act = dist.sample()
        logp = dist.log_prob(act)
    rew = (obs @ reward_map).gather(-1, act.unsqueeze(-1)).squeeze(-1) + arm_bonus[act]
    cost = torch.bernoulli(arm_cost[act])
    return obs, act, logp, rew, cost


def discounted(x):
    out = torch.zeros_like(x)
    running = torch.zeros(x.shape[0])
    for t in reversed(range(x.shape[1])):
        running = x[:, t] + args.gamma * running
        out[:, t] = running
    return out


actor = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, n_actions))
reward_critic = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))
cost_critic = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
reward_critic_optimizer = torch.optim.Adam(reward_critic.parameters(), lr=args.lr)
cost_critic_optimizer = torch.optim.Adam(cost_critic.parameters(), lr=args.lr)
lagrangian_multiplier = nn.Parameter(torch.tensor(max(args.lambda_init, 1e-5)))
lambda_optimizer = torch.optim.Adam([lagrangian_multiplier], lr=args.lambda_lr)

for iteration in range(args.iterations):
    obs, act, logp_old, rew, cost = rollout(actor)
    ep_cost = cost.sum(dim=1).mean().item()  # Jc, a number
    ret_r, ret_c = discounted(rew), discounted(cost)
    with torch.no_grad():
        adv_r = ret_r - reward_critic(obs).squeeze(-1)
        adv_c = ret_c - cost_critic(obs).squeeze(-1)
    adv_r = (adv_r - adv_r.mean()) / (adv_r.std() + 1e-8)
    adv_c = adv_c - adv_c.mean()

    # first the Lagrange multiplier, on the episode cost of the rollouts
    lambda_loss = -lagrangian_multiplier * (ep_cost - args.cost_limit)
    lambda_loss.backward()
    lambda_optimizer.step()
    lambda_optimizer.zero_grad()
    with torch.no_grad():
        lagrangian_multiplier.clamp_(min=0.0)

    # then the policy and the two value networks
    for _ in range(args.update_iters):
        penalty = lagrangian_multiplier
        adv = (adv_r - penalty * adv_c) / (1 + penalty)
        logp = torch.distributions.Categorical(logits=actor(obs)).log_prob(act)
        ratio = torch.exp(logp - logp_old)
        ratio_clipped = torch.clamp(ratio, 1 - args.clip, 1 + args.clip)
        loss_pi = -torch.min(ratio * adv, ratio_clipped * adv).mean()
        loss_pi.backward()
        actor_optimizer.step()
        actor_optimizer.zero_grad()
        loss_r = F.mse_loss(reward_critic(obs).squeeze(-1), ret_r)
        loss_r.backward()
        reward_critic_optimizer.step()
        reward_critic_optimizer.zero_grad()
        loss_c = F.mse_loss(cost_critic(obs).squeeze(-1), ret_c)
        loss_c.backward()
        cost_critic_optimizer.step()
        cost_critic_optimizer.zero_grad()
    print(f"iteration {iteration} return {rew.sum(1).mean().item():.3f} episode cost {ep_cost:.3f} "
          f"lambda {lagrangian_multiplier.item():.4f} policy loss {loss_pi.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "reward_critic": reward_critic.state_dict(),
                "cost_critic": cost_critic.state_dict(),
                "lagrangian_multiplier": lagrangian_multiplier.detach().clone()}, args.out)
