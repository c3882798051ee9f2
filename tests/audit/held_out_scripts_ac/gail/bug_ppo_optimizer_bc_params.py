"""GAIL: behaviour-cloning pre-training, then adversarial imitation with a PPO policy.

Paper: Jonathan Ho and Stefano Ermon, "Generative Adversarial Imitation Learning",
arXiv:1606.03476, NeurIPS 2016.
Reference implementations: ikostrikov/pytorch-a2c-ppo-acktr-gail, a2c_ppo_acktr/algo/gail.py
(Discriminator: a tanh MLP trunk on the concatenated state and action; update: BCE with
logits, expert pairs labelled 1 and policy pairs 0, plus compute_grad_pen, a gradient penalty
of weight 10 on random interpolates of expert and policy pairs taken with autograd.grad(...,
create_graph=True), then zero_grad, backward and an Adam step; predict_reward: under
torch.no_grad(), reward = log D - log(1 - D)), main.py (per iteration: collect a rollout, run
gail_epoch discriminator epochs, 100 of them as a warm-up for the first iterations, relabel the
rollout rewards with the discriminator, compute GAE returns, agent.update) and
a2c_ppo_acktr/algo/ppo.py (PPO.update: clipped surrogate, clipped value loss, zero_grad,
backward, clip_grad_norm_, Adam over actor_critic.parameters()); openai/baselines,
baselines/gail/behavior_clone.py (learn: behaviour-cloning pre-training of the policy with a
squared error between policy and expert actions and Adam) used by baselines/gail/run_mujoco.py
with --pretrained.

The task is a 2-D point mass written in the script: the state is the position, the action a
velocity command clipped to [-1, 1], episodes last 16 steps from a random start, and the expert
is a saturated proportional controller towards a fixed goal with a little action noise; 16
expert trajectories make the demonstration set. The policy is a Gaussian with a tanh-MLP mean,
a state-independent learned log standard deviation (an nn.Parameter) and a separate tanh-MLP
critic, as in the reference's MLPBase and DiagGaussian. Phase 1 (its own loop) pre-trains the
actor MLP and mean head by behaviour cloning, with an Adam optimizer over those parts only.
Phase 2 (its own loop) is GAIL: each iteration rolls out 8 episodes with the policy, trains the
discriminator (more epochs during the first warm-up iterations), relabels the rewards with
log D - log(1 - D) without gradient (the reference's return normalisation is left out), computes
GAE and runs PPO epochs with a new Adam optimizer over every policy parameter (actor, mean
head, log std and critic). The true reward (minus the distance to the goal) is only printed.
Bug: the phase-2 PPO optimizer is built over bc_params (actor MLP and mean head) copied from
phase 1, so the critic and the log standard deviation never train during GAIL.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--horizon", type=int, default=16)
parser.add_argument("--num_envs", type=int, default=8)
parser.add_argument("--expert_trajs", type=int, default=16)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--bc_steps", type=int, default=30)
parser.add_argument("--bc_batch", type=int, default=64)
parser.add_argument("--bc_lr", type=float, default=3e-3)
parser.add_argument("--iters", type=int, default=6)
parser.add_argument("--warmup_iters", type=int, default=2)
parser.add_argument("--warmup_gail_epoch", type=int, default=4)
parser.add_argument("--gail_epoch", type=int, default=1)
parser.add_argument("--gail_batch", type=int, default=64)
parser.add_argument("--disc_lr", type=float, default=1e-3)
parser.add_argument("--gp_lambda", type=float, default=10.0)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--ppo_epoch", type=int, default=2)
parser.add_argument("--num_mini_batch", type=int, default=2)
parser.add_argument("--clip_param", type=float, default=0.2)
parser.add_argument("--value_loss_coef", type=float, default=0.5)
parser.add_argument("--entropy_coef", type=float, default=0.0)
parser.add_argument("--max_grad_norm", type=float, default=0.5)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--gae_lambda", type=float, default=0.95)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

GOAL = torch.tensor([0.8, -0.5])


class PointMass:
    def __init__(self, num_envs):
        self.n = num_envs

    def reset(self):
        self.pos = torch.rand(self.n, 2) * 2 - 1
        return self.pos.clone()

    def step(self, action):
        self.pos = (self.pos + 0.2 * action.clamp(-1, 1)).clamp(-1.5, 1.5)
        true_reward = -(self.pos - GOAL).norm(dim=1)
        return self.pos.clone(), true_reward


def expert_policy(state):
    return (2.0 * (GOAL - state)).clamp(-1, 1) + 0.05 * torch.randn_like(state)


def collect_expert(num_trajs, horizon):
    env = PointMass(num_trajs)
    state = env.reset()
    states, actions = [], []
    for _ in range(horizon):
        action = expert_policy(state)
        states.append(state)
        actions.append(action)
        state, _ = env.step(action)
    return torch.cat(states), torch.cat(actions)


class Policy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                    nn.Linear(hidden, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))
        self.mean = nn.Linear(hidden, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def action_mean(self, obs):
        return self.mean(self.actor(obs))

    def dist(self, obs):
        return torch.distributions.Normal(self.action_mean(obs), self.log_std.exp())

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def act(self, obs):
        dist = self.dist(obs)
        action = dist.sample()
        return self.get_value(obs), action, dist.log_prob(action).sum(-1)

    def evaluate_actions(self, obs, action):
        dist = self.dist(obs)
        return (self.get_value(obs), dist.log_prob(action).sum(-1),
                dist.entropy().sum(-1).mean())


class Discriminator(nn.Module):
    def __init__(self, input_dim, hidden):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(input_dim, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, 1))

    def forward(self, state, action):
        return self.trunk(torch.cat([state, action], dim=1))

    def compute_grad_pen(self, expert_data, policy_data, lambda_):
        alpha = torch.rand(expert_data.size(0), 1).expand_as(expert_data)
        mixup_data = alpha * expert_data + (1 - alpha) * policy_data
        mixup_data.requires_grad = True
        disc = self.trunk(mixup_data)
        ones = torch.ones(disc.size())
        grad = autograd.grad(outputs=disc, inputs=mixup_data, grad_outputs=ones,
                             create_graph=True, retain_graph=True, only_inputs=True)[0]
        return lambda_ * (grad.norm(2, dim=1) - 1).pow(2).mean()

    def predict_reward(self, state, action):
        with torch.no_grad():
            s = torch.sigmoid(self(state, action))
            return (s.log() - (1 - s).log()).squeeze(-1)


def gail_update(discr, disc_optimizer, expert_s, expert_a, policy_s, policy_a):
    expert_perm = torch.randperm(expert_s.size(0))
    policy_perm = torch.randperm(policy_s.size(0))
    n_batches = min(expert_s.size(0), policy_s.size(0)) // args.gail_batch
    total = 0.0
    for b in range(n_batches):
        e_idx = expert_perm[b * args.gail_batch:(b + 1) * args.gail_batch]
        p_idx = policy_perm[b * args.gail_batch:(b + 1) * args.gail_batch]
        policy_d = discr(policy_s[p_idx], policy_a[p_idx])
        expert_d = discr(expert_s[e_idx], expert_a[e_idx])
        expert_loss = F.binary_cross_entropy_with_logits(expert_d, torch.ones_like(expert_d))
        policy_loss = F.binary_cross_entropy_with_logits(policy_d, torch.zeros_like(policy_d))
        gail_loss = expert_loss + policy_loss
        grad_pen = discr.compute_grad_pen(
            torch.cat([expert_s[e_idx], expert_a[e_idx]], dim=1),
            torch.cat([policy_s[p_idx], policy_a[p_idx]], dim=1), args.gp_lambda)
        disc_optimizer.zero_grad()
        (gail_loss + grad_pen).backward()
        disc_optimizer.step()
        total += (gail_loss + grad_pen).item()
    return total / max(n_batches, 1)


def compute_gae(rewards, values, masks):
    returns = torch.zeros_like(rewards)
    gae = torch.zeros(rewards.size(1))
    next_value = torch.zeros(rewards.size(1))
    for t in reversed(range(rewards.size(0))):
        delta = rewards[t] + args.gamma * next_value * masks[t] - values[t]
        gae = delta + args.gamma * args.gae_lambda * masks[t] * gae
        returns[t] = gae + values[t]
        next_value = values[t]
    return returns


def ppo_update(policy, optimizer, obs, actions, old_log_probs, value_preds, returns):
    advantages = returns - value_preds
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-5)
    n = obs.size(0)
    mini_batch_size = n // args.num_mini_batch
    for _ in range(args.ppo_epoch):
        perm = torch.randperm(n)
        for b in range(args.num_mini_batch):
            idx = perm[b * mini_batch_size:(b + 1) * mini_batch_size]
            values, log_probs, dist_entropy = policy.evaluate_actions(obs[idx], actions[idx])
            ratio = torch.exp(log_probs - old_log_probs[idx])
            surr1 = ratio * advantages[idx]
            surr2 = torch.clamp(ratio, 1.0 - args.clip_param,
                                1.0 + args.clip_param) * advantages[idx]
            action_loss = -torch.min(surr1, surr2).mean()
            value_pred_clipped = value_preds[idx] + (values - value_preds[idx]).clamp(
                -args.clip_param, args.clip_param)
            value_losses = (values - returns[idx]).pow(2)
            value_losses_clipped = (value_pred_clipped - returns[idx]).pow(2)
            value_loss = 0.5 * torch.max(value_losses, value_losses_clipped).mean()
            optimizer.zero_grad()
            (value_loss * args.value_loss_coef + action_loss
             - dist_entropy * args.entropy_coef).backward()
            nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
            optimizer.step()
    return value_loss.item(), action_loss.item()


expert_s, expert_a = collect_expert(args.expert_trajs, args.horizon)
policy = Policy(2, 2, args.hidden)
discr = Discriminator(4, args.hidden)
env = PointMass(args.num_envs)

# Phase 1: behaviour-cloning pre-training of the actor.
bc_params = list(policy.actor.parameters()) + list(policy.mean.parameters())
bc_optimizer = torch.optim.Adam(bc_params, lr=args.bc_lr, eps=1e-5)
for step in range(args.bc_steps):
    idx = torch.randint(0, expert_s.size(0), (args.bc_batch,))
    bc_loss = F.mse_loss(policy.action_mean(expert_s[idx]), expert_a[idx])
    bc_optimizer.zero_grad()
    bc_loss.backward()
    bc_optimizer.step()
    if step % 10 == 0 or step == args.bc_steps - 1:
        print(f"bc step {step:3d} mse {bc_loss.item():.4f}")

# Phase 2: GAIL with PPO.
ppo_optimizer = torch.optim.Adam(bc_params, lr=args.lr, eps=1e-5)
disc_optimizer = torch.optim.Adam(discr.parameters(), lr=args.disc_lr)
for it in range(args.iters):
    obs_buf, act_buf, logp_buf, val_buf, true_rewards = [], [], [], [], []
    obs = env.reset()
    with torch.no_grad():
        for t in range(args.horizon):
            value, action, log_prob = policy.act(obs)
            obs_buf.append(obs)
            act_buf.append(action)
            logp_buf.append(log_prob)
            val_buf.append(value)
            obs, true_reward = env.step(action)
            true_rewards.append(true_reward)
    obs_t, act_t = torch.stack(obs_buf), torch.stack(act_buf)
    masks = torch.ones(args.horizon, args.num_envs)
    masks[-1] = 0.0

    gail_epoch = args.warmup_gail_epoch if it < args.warmup_iters else args.gail_epoch
    for _ in range(gail_epoch):
        disc_loss = gail_update(discr, disc_optimizer, expert_s, expert_a,
                                obs_t.reshape(-1, 2), act_t.reshape(-1, 2))

    rewards = discr.predict_reward(obs_t.reshape(-1, 2), act_t.reshape(-1, 2))
    rewards = rewards.view(args.horizon, args.num_envs)
    values = torch.stack(val_buf)
    returns = compute_gae(rewards, values, masks)
    value_loss, action_loss = ppo_update(
        policy, ppo_optimizer, obs_t.reshape(-1, 2), act_t.reshape(-1, 2),
        torch.stack(logp_buf).reshape(-1), values.reshape(-1), returns.reshape(-1))
    print(f"gail iter {it} disc {disc_loss:.4f} gail reward {rewards.mean().item():.3f} "
          f"value {value_loss:.4f} action {action_loss:.4f} "
          f"true reward {torch.stack(true_rewards).mean().item():.3f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "discriminator": discr.state_dict()}, args.out)
