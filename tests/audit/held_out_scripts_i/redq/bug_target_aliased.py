"""Randomized ensembled double Q-learning at a tiny size, written after Chen, Wang, Zhou and Ross,
"Randomized Ensembled Double Q-Learning: Learning Fast Without a Model" (ICLR 2021,
arXiv:2101.05982), algorithm 1, with watchernyu/REDQ (https://github.com/watchernyu/REDQ,
redq/algos/redq_sac.py REDQSACAgent: an ensemble of N Q networks, each with its own Adam and its
own target network built apart and loaded from it; get_redq_q_target_no_grad, which takes the
min over a random subset of M target Qs under torch.no_grad(); train, with G updates per
environment step, the policy's loss on the mean of all N Qs computed with each Q network set to
requires_grad_(False) and set back after policy_loss.backward(), the Qs' Adam steps after the
policy's backward, the entropy temperature learnt, and soft_update_model1_with_model2 for the
polyak average; redq/algos/core.py TanhGaussianPolicy). Two phases as in REDQ's start_steps:
a warm-up of uniformly random actions that only fills the replay buffer, then the agent acts with
its tanh-Gaussian policy and makes G updates after each step. A point-reaching task made in the
script. Injected bug: the target ensemble is made as list(q_nets), a new list of the same
networks (for a copy of each: REDQ builds every target network apart and loads the Q's
weights into it), so the polyak average copies each Q onto itself and from the second update
the min over the random subset of target Qs is read from the Q networks being trained;
second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--start-steps", type=int, default=40)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--utd", type=int, default=4, help="G, updates per environment step")
parser.add_argument("--num-q", type=int, default=5)
parser.add_argument("--num-min", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--polyak", type=float, default=0.995)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden_dim, episode_len = 4, 2, 32, 10


def reset():
    return 2 * torch.rand(obs_dim) - 1


def step_env(obs, action):
    """A point moved towards a goal; the observation holds point and goal."""
    position = (obs[:2] + 0.3 * action).clamp(-1, 1)
    return torch.cat([position, obs[2:]]), -(position - obs[2:]).norm()


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim),
                         nn.ReLU(), nn.Linear(hidden_dim, n_out))


class TanhGaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        normal = torch.distributions.Normal(mean, log_std.clamp(-20, 2).exp())
        pre_tanh = normal.rsample()
        action = torch.tanh(pre_tanh)
        log_prob = normal.log_prob(pre_tanh) - torch.log(1 - action.pow(2) + 1e-6)
        return action, log_prob.sum(-1, keepdim=True)


policy = TanhGaussianPolicy()
q_nets = [mlp(obs_dim + act_dim, 1) for _ in range(args.num_q)]
q_target_nets = list(q_nets)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
q_optimizers = [torch.optim.Adam(q.parameters(), lr=args.lr) for q in q_nets]
log_alpha = torch.zeros(1, requires_grad=True)
alpha_optimizer = torch.optim.Adam([log_alpha], lr=args.lr)
target_entropy = -float(act_dim)
buffer = {k: [] for k in ("obs", "act", "rew", "next_obs", "done")}


def sample_batch():
    idx = torch.randint(0, len(buffer["obs"]), (args.batch_size,))
    return [torch.stack(buffer[k])[idx] for k in ("obs", "act", "rew", "next_obs", "done")]


def update(last):
    obs, act, rew, next_obs, done = sample_batch()
    alpha = log_alpha.exp().item()
    sample_idxs = torch.randperm(args.num_q)[:args.num_min]
    with torch.no_grad():
        next_act, next_log_prob = policy(next_obs)
        next_in = torch.cat([next_obs, next_act], dim=-1)
        min_q = torch.cat([q_target_nets[i](next_in) for i in sample_idxs], dim=1).min(1, True)[0]
        y_q = rew + args.gamma * (1 - done) * (min_q - alpha * next_log_prob)
    q_pred = torch.cat([q(torch.cat([obs, act], dim=-1)) for q in q_nets], dim=1)
    q_loss = F.mse_loss(q_pred, y_q.expand(-1, args.num_q)) * args.num_q
    for q_optimizer in q_optimizers:
        q_optimizer.zero_grad()
    q_loss.backward()
    if last:  # the policy and the temperature once per environment step, after the G-th Q loss
        new_act, log_prob = policy(obs)
        for q in q_nets:
            q.requires_grad_(False)
        ave_q = torch.cat([q(torch.cat([obs, new_act], dim=-1)) for q in q_nets], 1).mean(1, True)
        policy_loss = (alpha * log_prob - ave_q).mean()
        policy_optimizer.zero_grad()
        policy_loss.backward()
        for q in q_nets:
            q.requires_grad_(True)
        alpha_loss = -(log_alpha * (log_prob + target_entropy).detach()).mean()
        alpha_optimizer.zero_grad()
        alpha_loss.backward()
        alpha_optimizer.step()
    for q_optimizer in q_optimizers:
        q_optimizer.step()
    if last:
        policy_optimizer.step()
    with torch.no_grad():
        for q, q_target in zip(q_nets, q_target_nets):
            for p, p_target in zip(q.parameters(), q_target.parameters()):
                p_target.copy_(args.polyak * p_target + (1 - args.polyak) * p)
    return q_loss.item()


obs, t = reset(), 0
for step in range(args.start_steps + args.steps):
    if step < args.start_steps:  # phase 1: random actions fill the buffer, no update
        action = 2 * torch.rand(act_dim) - 1
    else:
        with torch.no_grad():
            action = policy(obs)[0]
    next_obs, reward = step_env(obs, action)
    t += 1
    done = float(t == episode_len)
    for k, v in zip(buffer, (obs, action, reward.view(1), next_obs, torch.tensor([0.0]))):
        buffer[k].append(v)
    obs = next_obs
    if done:
        obs, t = reset(), 0
    if step >= args.start_steps:  # phase 2: G updates per environment step
        for g in range(args.utd):
            q_loss = update(last=g == args.utd - 1)
        print(f"step {step} q_loss {q_loss:.4f} alpha {log_alpha.exp().item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "log_alpha": log_alpha.detach(),
                **{f"q{i}": q.state_dict() for i, q in enumerate(q_nets)},
                **{f"q_target{i}": q.state_dict() for i, q in enumerate(q_target_nets)}},
               args.out)
