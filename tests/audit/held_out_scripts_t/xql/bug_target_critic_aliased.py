"""Offline Extreme Q-Learning (X-QL), written after Garg, Hejna, Geist and Ermon, "Extreme
Q-Learning: MaxEnt RL without Entropy" (ICLR 2023, arXiv:2301.02328): the value V is fitted by
Gumbel regression, the loss E[exp(z) - z - 1] with z = (Q_target(s, a) - V(s)) / beta on the
dataset's actions, whose minimiser is the soft maximum beta log E exp(Q / beta), so that V
estimates the soft-optimal value without sampling any action from a policy; the double critic
Q is fitted to the TD target r + gamma (1 - done) V(s') with V cut from the graph; the policy
is extracted by advantage-weighted regression, the dataset actions' log-likelihood weighted by
exp(awr_beta (Q_target - V)) clamped at 100, the weights fixed numbers; the target critic is a
deep copy of the critic moved towards it by Polyak averaging. With the authors' code, Div99/XQL
(https://github.com/Div99/XQL, offline/critic.py update_v: Gumbel loss on q - v from the
target critic, with the exponent's max-offset rescaling gumbel_rescale_loss; update_q: target_q
= rewards + discount * masks * next_v, double critic; offline/actor.py update: exp_a =
exp((q - v) * temperature) clamped at 100, computed outside actor_loss_fn so it carries no
gradient, loss -(exp_a * log_probs).mean(); offline/learner.py _update_jit and target_update:
value, then actor, then critic, then the soft target update), and the PyTorch port in
LAMDA-RL/OfflineRL-Lib (offlinerllib/policy/model_free/xql.py XQLPolicy.update: the target
Q and the advantage weights under torch.no_grad(), _sync_weight as the Polyak update). Here the
three losses are taken at the same parameters and summed into one backward over three Adam
optimisers, so the actor and critic see the value of the step before (the reference uses the
freshly updated V); each loss reaches only its own network because every cross-network value
is detached; the Gumbel loss is the plain clipped form (gumbel_loss of the online code, with
the exponent clipped at max_clip) rather than the max-rescaled one; the critic loss is the
squared error instead of the Huber loss with delta 20. The offline data are transitions of a
tiny 3-d control problem collected by a noisy behaviour policy.
Bug: the target critic is bound to the critic itself, target_critic = critic, where a deep
copy is meant (Div99/XQL's offline/learner.py Learner.__init__ creates target_critic as its
own Model and target_update moves it by tau; LAMDA-RL/OfflineRL-Lib's XQLPolicy.__init__ makes
critic_q_target = make_target(critic_q), a copy), so the Polyak update p * tau + p * (1 - tau)
is the identity and the Gumbel regression of V, the advantage weights and, through V, the TD
targets all read the online critic of the step before: the slowly moving target that holds
the bootstrap loop V -> Q -> V steady is gone, and the saved target critic is the critic, from
the second update on."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--loss-temp", type=float, default=1.0, help="beta of the Gumbel loss")
parser.add_argument("--awr-beta", type=float, default=2.0, help="temperature of the AWR")
parser.add_argument("--max-clip", type=float, default=7.0)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden, n_data = 3, 2, 32, 1024

# offline dataset: s' = 0.9 s + 0.3 B a, reward for steering the state to the origin
B = torch.randn(obs_dim, act_dim)
observations = torch.randn(n_data, obs_dim)
behaviour_actions = torch.tanh(-observations @ B * 0.5)
actions = (behaviour_actions + 0.5 * torch.randn(n_data, act_dim)).clamp(-1, 1)
next_observations = 0.9 * observations + 0.3 * actions @ B.t()
rewards = -next_observations.pow(2).sum(1) - 0.1 * actions.pow(2).sum(1)
terminals = (torch.rand(n_data) < 0.05).float()


def mlp(inp, out):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


class DoubleCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1 = mlp(obs_dim + act_dim, 1)
        self.q2 = mlp(obs_dim + act_dim, 1)

    def forward(self, obs, act):
        x = torch.cat([obs, act], 1)
        return self.q1(x).squeeze(1), self.q2(x).squeeze(1)


class GaussianActor(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = mlp(obs_dim, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def log_prob(self, obs, act):
        dist = torch.distributions.Normal(torch.tanh(self.mean(obs)), self.log_std.exp())
        return dist.log_prob(act).sum(1)


def gumbel_loss(pred, target, beta, clip):
    z = ((target - pred) / beta).clamp(max=clip)
    return (z.exp() - z - 1).mean()


actor = GaussianActor()
critic = DoubleCritic()
value = mlp(obs_dim, 1)
target_critic = critic
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-3)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-3)
value_optimizer = torch.optim.Adam(value.parameters(), lr=3e-3)
optimizers = [value_optimizer, actor_optimizer, critic_optimizer]

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    obs, act, next_obs = observations[idx], actions[idx], next_observations[idx]
    rew, done = rewards[idx], terminals[idx]

    # value: Gumbel regression on the target critic's (fixed) Q
    with torch.no_grad():
        target_q = torch.min(*target_critic(obs, act))
    v = value(obs).squeeze(1)
    value_loss = gumbel_loss(v, target_q, args.loss_temp, args.max_clip)

    # policy: advantage-weighted regression with fixed weights
    weights = torch.exp(args.awr_beta * (target_q - v.detach())).clamp(max=100.0)
    actor_loss = -(weights * actor.log_prob(obs, act)).mean()

    # critic: TD target from V of the next state, cut from the graph
    with torch.no_grad():
        td_target = rew + args.discount * (1 - done) * value(next_obs).squeeze(1)
    q1, q2 = critic(obs, act)
    critic_loss = (q1 - td_target).pow(2).mean() + (q2 - td_target).pow(2).mean()

    for optimizer in optimizers:
        optimizer.zero_grad()
    (value_loss + actor_loss + critic_loss).backward()
    for optimizer in optimizers:
        optimizer.step()

    with torch.no_grad():
        for p, tp in zip(critic.parameters(), target_critic.parameters()):
            tp.copy_(tp * (1 - args.tau) + p * args.tau)

    if step % 50 == 0:
        print(f"step {step} value {value_loss.item():.4f} actor {actor_loss.item():.4f}"
              f" critic {critic_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "value": value.state_dict(), "target_critic": target_critic.state_dict()},
               args.out)
