"""TD-MPC's model learning at a tiny size, written after Hansen, Wang and Su, "Temporal
Difference Learning for Model Predictive Control" (ICML 2022, arXiv:2203.04955), section 3 and
algorithm 2: a task-oriented latent dynamics model (encoder h, latent dynamics d, reward R, twin
Q and a policy pi) is trained on sub-trajectories by a rho-discounted sum over the horizon of a
latent consistency loss against the next latent of a target encoder, a reward loss and a TD loss
whose target reads a target Q. With nicklashansen/tdmpc (https://github.com/nicklashansen/tdmpc,
src/algorithm/tdmpc.py: TDMPC.__init__, which makes model_target by deepcopy(self.model), one
Adam over self.model.parameters() and pi_optim over self.model._pi.parameters(); TDMPC.update,
which calls self.optim.zero_grad(set_to_none=True) first, rolls the latent forward, computes
next_z = self.model_target.h(next_obs) and the TD target inside torch.no_grad(), keeps the
latents z.detach() for the policy, scales the loss's gradient by 1 / horizon with a hook, clips
it and steps, then calls update_pi and every update_freq updates h.ema; _td_target, decorated
@torch.no_grad(); update_pi, which turns the Q networks' gradients off by track_q_grad(False)
before the policy's loss -min(Q1, Q2)(z, pi(z)) and back on by track_q_grad(True) after
pi_optim.step(); TOLD.track_q_grad). Sub-trajectories of a point moved towards random goals by
random actions, made in the script; no planning while training. Bug: update_pi turns the Q
networks' gradients off with model.track_q_grad(False) before the policy's loss but never back on,
the model.track_q_grad(True) after pi_optim.step() left out (nicklashansen/tdmpc's TDMPC.update_pi
calls self.model.track_q_grad(True) after the policy's step), so from the second update the twin Q
record no gradient of the TD loss and the model's Adam skips them: Q1 and Q2 keep the weights of
the first update while the encoder, the dynamics and the reward head train on."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--horizon", type=int, default=3)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--rho", type=float, default=0.5)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--update-freq", type=int, default=2)
parser.add_argument("--min-std", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, action_dim, latent_dim, hidden_dim = 4, 2, 8, 32
consistency_coef, reward_coef, value_coef, grad_clip_norm = 2.0, 0.5, 0.1, 10.0


def make_trajectories(n, horizon):
    """A point and a goal; random actions move the point, the reward is minus the distance."""
    obs = [2 * torch.rand(n, obs_dim) - 1]
    actions = 2 * torch.rand(horizon, n, action_dim) - 1
    rewards = []
    for t in range(horizon):
        position = (obs[-1][:, :2] + 0.3 * actions[t]).clamp(-1, 1)
        obs.append(torch.cat([position, obs[-1][:, 2:]], dim=1))
        rewards.append(-(position - obs[-1][:, 2:]).norm(dim=1, keepdim=True))
    return torch.stack(obs), actions, torch.stack(rewards)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ELU(), nn.Linear(hidden_dim, n_out))


class TOLD(nn.Module):
    def __init__(self):
        super().__init__()
        self._encoder = mlp(obs_dim, latent_dim)
        self._dynamics = mlp(latent_dim + action_dim, latent_dim)
        self._reward = mlp(latent_dim + action_dim, 1)
        self._pi = mlp(latent_dim, action_dim)
        self._Q1, self._Q2 = mlp(latent_dim + action_dim, 1), mlp(latent_dim + action_dim, 1)

    def track_q_grad(self, enable=True):
        for m in [self._Q1, self._Q2]:
            m.requires_grad_(enable)

    def h(self, obs):
        return self._encoder(obs)

    def next(self, z, a):
        x = torch.cat([z, a], dim=-1)
        return self._dynamics(x), self._reward(x)

    def pi(self, z, std=0.0):
        mu = torch.tanh(self._pi(z))
        if std == 0:
            return mu
        x = mu + (std * torch.randn_like(mu)).clamp(-0.3, 0.3)
        return x - x.detach() + x.clamp(-1 + 1e-6, 1 - 1e-6).detach()

    def Q(self, z, a):
        x = torch.cat([z, a], dim=-1)
        return self._Q1(x), self._Q2(x)


model = TOLD()
model_target = copy.deepcopy(model)
optim = torch.optim.Adam(model.parameters(), lr=args.lr)
pi_optim = torch.optim.Adam(model._pi.parameters(), lr=args.lr)
buffer = make_trajectories(256, args.horizon)


@torch.no_grad()
def td_target(next_obs, reward):
    next_z = model.h(next_obs)
    next_q = torch.min(*model_target.Q(next_z, model.pi(next_z, args.min_std)))
    return reward + args.discount * next_q


def update_pi(zs):
    pi_optim.zero_grad(set_to_none=True)
    model.track_q_grad(False)
    pi_loss = 0
    for t, z in enumerate(zs):
        a = model.pi(z, args.min_std)
        pi_loss += -torch.min(*model.Q(z, a)).mean() * (args.rho ** t)
    pi_loss.backward()
    torch.nn.utils.clip_grad_norm_(model._pi.parameters(), grad_clip_norm)
    pi_optim.step()
    return pi_loss.item()


for step in range(args.updates):
    idx = torch.randint(0, buffer[0].shape[1], (args.batch_size,))
    obses, action, reward = buffer[0][:, idx], buffer[1][:, idx], buffer[2][:, idx]
    optim.zero_grad(set_to_none=True)

    z = model.h(obses[0])
    zs = [z.detach()]
    consistency_loss, reward_loss, value_loss = 0, 0, 0
    for t in range(args.horizon):
        Q1, Q2 = model.Q(z, action[t])
        z, reward_pred = model.next(z, action[t])
        with torch.no_grad():
            next_obs = obses[t + 1]
            next_z = model_target.h(next_obs)
            target = td_target(next_obs, reward[t])
        zs.append(z.detach())
        rho = args.rho ** t
        consistency_loss += rho * F.mse_loss(z, next_z, reduction="none").mean(1, keepdim=True)
        reward_loss += rho * F.mse_loss(reward_pred, reward[t], reduction="none")
        value_loss += rho * (F.mse_loss(Q1, target, reduction="none")
                             + F.mse_loss(Q2, target, reduction="none"))

    total_loss = (consistency_coef * consistency_loss.clamp(max=1e4)
                  + reward_coef * reward_loss.clamp(max=1e4)
                  + value_coef * value_loss.clamp(max=1e4))
    weighted_loss = total_loss.mean()
    weighted_loss.register_hook(lambda grad: grad * (1 / args.horizon))
    weighted_loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip_norm)
    optim.step()

    pi_loss = update_pi(zs)
    if step % args.update_freq == 0:
        with torch.no_grad():
            for p, p_target in zip(model.parameters(), model_target.parameters()):
                p_target.lerp_(p, args.tau)
    print(f"step {step} consistency {consistency_loss.mean().item():.4f} "
          f"reward {reward_loss.mean().item():.4f} value {value_loss.mean().item():.4f} "
          f"pi {pi_loss:.4f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"model_target.{k}": v for k, v in model_target.state_dict().items()}},
               args.out)
