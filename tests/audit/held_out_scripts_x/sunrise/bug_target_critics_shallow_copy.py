"""SUNRISE, an ensemble of soft actor-critic agents with weighted Bellman backups, bootstrap
masks and UCB exploration, on a tiny synthetic 2-D point-reaching task, written after Lee,
Laskin, Srinivas and Abbeel, "SUNRISE: A Simple Unified Framework for Ensemble Learning in Deep
Reinforcement Learning" (ICML 2021, arXiv:2007.04938): N SAC agents (a policy, two critics and
their target critics each) share one replay buffer; every transition carries a Bernoulli(0.5)
mask per agent (at least one on) and each agent's losses are averaged over its own masked
samples; the critic's Bellman error on a sample is weighted by sigmoid(-std(Q_target) * T) + 0.5,
the standard deviation taken over all the target critics at the next state, so that backups
from uncertain targets count less; the agent acts with the candidate action, among the
policies' proposals, of highest mean Q + lambda * std Q (UCB). With the authors' code,
pokaxpoka/sunrise (https://github.com/pokaxpoka/sunrise, OpenAIGym_SAC), whose steps this script
follows: examples/sunrise.py (separate FlattenMlp critics, target critics and a
TanhGaussianPolicy per agent, feedback_type 1, temperature 20, ber_mean 0.5);
rlkit/torch/sac/neurips20_sac_ensemble.py NeurIPS20SACEnsembleTrainer: __init__ (one Adam per
policy, per critic and per log_alpha), corrective_feedback (update_type 1: under no_grad, each
agent's policy action at next_obs, both target critics of every agent, the std over all of them),
train_from_torch (per agent: the alpha loss on the detached log_pi + target_entropy; the policy
loss alpha * log_pi - min(Q1, Q2) over the mask; the target min(target Q) - alpha * log_pi at
the next state with the agent's own policy, q_target detached; the squared Bellman errors times
mask times the detached weight, summed over (mask.sum() + 1); zero_grad, backward and step for
each critic and the policy; soft_update_from_to of the target critics with tau);
rlkit/samplers/rollout_functions.py get_ucb_std and ensemble_ucb_rollout (UCB choice, masks).
Here the losses are all made before any step, as in train_from_torch, and the policy is stepped
before the critics, so that every gradient is taken at the weights its loss was computed with;
the target critics start as copies of the critics; three agents, MLPs of width 32.
Bug: copy.copy makes the target critics share the critics' modules: no separate targets."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--num-ensemble", type=int, default=3)
parser.add_argument("--random-steps", type=int, default=100)
parser.add_argument("--train-steps", type=int, default=80, help="env steps with one update each")
parser.add_argument("--episode-len", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--ber-mean", type=float, default=0.5)
parser.add_argument("--temperature", type=float, default=20.0)
parser.add_argument("--ucb-lambda", type=float, default=1.0, help="inference_type")
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=5e-3)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the agents")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden, n_ens = 2, 2, 32, args.num_ensemble
goal = torch.tensor([0.6, -0.4])
target_entropy = -float(act_dim)


def env_reset():
    return torch.rand(obs_dim) * 2 - 1


def env_step(obs, action):
    next_obs = (obs + 0.15 * action).clamp(-1.0, 1.0)
    return next_obs, -(next_obs - goal).norm().item()


def mlp(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, d_out))


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(obs_dim + act_dim, 1)

    def forward(self, obs, action):
        return self.net(torch.cat([obs, action], -1))


class TanhGaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim)

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, -1)
        std = log_std.clamp(-20.0, 2.0).exp()
        pre_tanh = mean + std * torch.randn_like(mean)
        action = torch.tanh(pre_tanh)
        log_prob = torch.distributions.Normal(mean, std).log_prob(pre_tanh)
        log_prob = (log_prob - torch.log(1 - action ** 2 + 1e-6)).sum(-1, keepdim=True)
        return action, log_prob


policies = nn.ModuleList([TanhGaussianPolicy() for _ in range(n_ens)])
qf1 = nn.ModuleList([QNet() for _ in range(n_ens)])
qf2 = nn.ModuleList([QNet() for _ in range(n_ens)])
target_qf1, target_qf2 = copy.copy(qf1), copy.copy(qf2)
log_alphas = [torch.zeros(1, requires_grad=True) for _ in range(n_ens)]
policy_optimizers = [torch.optim.Adam(p.parameters(), lr=args.lr) for p in policies]
qf1_optimizers = [torch.optim.Adam(q.parameters(), lr=args.lr) for q in qf1]
qf2_optimizers = [torch.optim.Adam(q.parameters(), lr=args.lr) for q in qf2]
alpha_optimizers = [torch.optim.Adam([la], lr=args.lr) for la in log_alphas]

buffer = {k: [] for k in ("obs", "actions", "rewards", "next_obs", "masks")}


def store(obs, action, reward, next_obs):
    mask = torch.bernoulli(torch.full((n_ens,), args.ber_mean))
    if mask.sum() == 0:
        mask[torch.randint(0, n_ens, (1,))] = 1.0
    for k, v in zip(buffer, (obs, action, torch.tensor([reward]), next_obs, mask)):
        buffer[k].append(v)


@torch.no_grad()
def ucb_action(obs):
    """Each policy proposes an action; keep the one of highest mean + lambda * std over all critics."""
    candidates = torch.stack([p(obs.unsqueeze(0))[0][0] for p in policies])
    obs_rep = obs.expand(n_ens, obs_dim)
    qs = torch.cat([q(obs_rep, candidates) for q in list(qf1) + list(qf2)], -1)
    ucb = qs.mean(-1) + args.ucb_lambda * qs.std(-1, unbiased=False)
    return candidates[ucb.argmax()]


@torch.no_grad()
def critic_feedback_std(next_obs):
    """corrective_feedback, update_type 1: std over all agents' target critics at their policy's action."""
    qs = []
    for i in range(n_ens):
        next_actions, _ = policies[i](next_obs)
        qs += [target_qf1[i](next_obs, next_actions), target_qf2[i](next_obs, next_actions)]
    return torch.cat(qs, -1).std(-1, unbiased=False, keepdim=True)


def soft_update(source, target):
    for p, tp in zip(source.parameters(), target.parameters()):
        tp.data.copy_(tp.data * (1.0 - args.tau) + p.data * args.tau)


def train_step():
    idx = torch.randint(0, len(buffer["obs"]), (args.batch_size,))
    obs, actions, rewards, next_obs, masks = (torch.stack(buffer[k])[idx] for k in buffer)
    std_q = critic_feedback_std(next_obs)
    weight_target_q = torch.sigmoid(-std_q * args.temperature) + 0.5
    for i in range(n_ens):
        mask = masks[:, i:i + 1]
        new_actions, log_pi = policies[i](obs)
        alpha_loss = -(log_alphas[i] * (log_pi + target_entropy).detach() * mask).sum() / (mask.sum() + 1)
        alpha_optimizers[i].zero_grad()
        alpha_loss.backward()
        alpha_optimizers[i].step()
        alpha = log_alphas[i].exp().detach()
        q_new_actions = torch.min(qf1[i](obs, new_actions), qf2[i](obs, new_actions))
        policy_loss = ((alpha * log_pi - q_new_actions) * mask).sum() / (mask.sum() + 1)

        with torch.no_grad():
            next_actions, next_log_pi = policies[i](next_obs)
            target_q = torch.min(target_qf1[i](next_obs, next_actions),
                                 target_qf2[i](next_obs, next_actions)) - alpha * next_log_pi
            q_target = rewards + args.discount * target_q
        qf1_loss = ((qf1[i](obs, actions) - q_target) ** 2 * mask * weight_target_q).sum() / (mask.sum() + 1)
        qf2_loss = ((qf2[i](obs, actions) - q_target) ** 2 * mask * weight_target_q).sum() / (mask.sum() + 1)

        policy_optimizers[i].zero_grad()
        policy_loss.backward()
        policy_optimizers[i].step()
        qf1_optimizers[i].zero_grad()
        qf1_loss.backward()
        qf1_optimizers[i].step()
        qf2_optimizers[i].zero_grad()
        qf2_loss.backward()
        qf2_optimizers[i].step()
        soft_update(qf1[i], target_qf1[i])
        soft_update(qf2[i], target_qf2[i])
    return qf1_loss.item(), policy_loss.item()


obs, t = env_reset(), 0
for step in range(args.random_steps + args.train_steps):
    action = torch.rand(act_dim) * 2 - 1 if step < args.random_steps else ucb_action(obs)
    next_obs, reward = env_step(obs, action)
    store(obs, action, reward, next_obs)
    obs, t = next_obs, t + 1
    if t == args.episode_len:
        obs, t = env_reset(), 0
    if step >= args.random_steps:
        q_loss, pi_loss = train_step()
        if step % 20 == 0:
            print(f"step {step} reward {reward:.3f} qf1 loss {q_loss:.4f} policy loss {pi_loss:.4f}")

if args.out:
    torch.save({"policies": policies.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict(),
                "target_qf1": target_qf1.state_dict(), "target_qf2": target_qf2.state_dict(),
                "log_alphas": torch.cat(log_alphas).detach()}, args.out)
