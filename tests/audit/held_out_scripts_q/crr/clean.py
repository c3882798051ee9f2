"""Critic Regularized Regression (CRR) for offline RL at a tiny size, written after Wang, Novikov,
Zolna, Springenberg, Reed, Shahriari, Siegel, Merel, Gulcehre, Heess and de Freitas, "Critic
Regularized Regression" (NeurIPS 2020, arXiv:2006.15134), algorithm 1 with the exponential filter
of equation (4): from a fixed data set only, a critic is fitted by TD learning on targets that a
target critic gives to actions the target policy samples at the next state, and the policy is
trained by a weighted regression onto the data set's own actions, -log pi(a|s) times
f = min(exp(A(s, a) / beta), 20), where the advantage A(s, a) = Q(s, a) - mean_j Q(s, a_j) uses
actions a_j the current policy samples; the weight is a constant of the policy loss, so the
policy only moves by the likelihood of data actions the critic rates above the policy's average.
With google-deepmind/acme (https://github.com/google-deepmind/acme, acme/agents/jax/crr/
losses.py _compute_advantage: four policy samples per state, the critic's mean over them as the
state value, and policy_loss_coeff_advantage_exp: the exponentiated advantage bounded above by
20; learning.py CRRLearner: policy_loss wraps the coefficient in jax.lax.stop_gradient and
returns minus the mean of log-probability times coefficient, critic_loss samples the next action
from the target policy, scores it with the target critic, stops the gradient of the TD target
and takes half the mean squared error, and sgd_step refreshes both target parameter sets with
rlax.periodic_update every target_update_period steps) and the PyTorch port in takuseno/d3rlpy
(https://github.com/takuseno/d3rlpy, d3rlpy/algos/qlearning/torch/crr_impl.py CRRImpl:
_compute_advantage under torch.no_grad() from sample_n actions, _compute_weight with the exp
filter clamped at max_weight, compute_actor_loss as -(log_probs * weight).mean(); crr.py
CRR.inner_update: the critic step, the actor step, then the hard sync of both targets every
target_update_interval steps). Here the policy is a Gaussian on unbounded actions, as d3rlpy's
non-squashed policy, and the targets are separate modules synced by load_state_dict. The data:
a reaching task on the plane, logged by a mixture of a good and a poor behaviour policy, made in
the script.
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--num-action-samples", type=int, default=4)
parser.add_argument("--beta", type=float, default=1.0)
parser.add_argument("--max-weight", type=float, default=20.0)
parser.add_argument("--discount", type=float, default=0.95)
parser.add_argument("--target-update-period", type=int, default=10)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden = 3, 2, 32

# offline data: a point on the plane (plus a phase feature) pushed towards a target; half the
# transitions come from a policy that heads for the target, half from one that drifts sideways
n_data, goal = 2000, torch.tensor([0.5, -0.5])
pos = torch.rand(n_data, 2) * 2 - 1
states = torch.cat([pos, torch.rand(n_data, 1)], 1)
good = (torch.rand(n_data, 1) < 0.5).float()
to_goal = goal - pos
drift = torch.stack([-to_goal[:, 1], to_goal[:, 0]], 1)
actions = good * to_goal + (1 - good) * drift + 0.2 * torch.randn(n_data, action_dim)
next_pos = pos + 0.5 * actions.clamp(-1, 1)
next_states = torch.cat([next_pos, (states[:, 2:] + 0.1) % 1.0], 1)
rewards = -(next_pos - goal).norm(dim=1, keepdim=True)
not_dones = (next_pos.abs().max(1, keepdim=True)[0] < 1.5).float()


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU())
        self.mu, self.log_std = nn.Linear(hidden, action_dim), nn.Linear(hidden, action_dim)

    def dist(self, state):
        h = self.body(state)
        return torch.distributions.Normal(self.mu(h), self.log_std(h).clamp(-5.0, 2.0).exp())

    def log_prob(self, state, action):
        return self.dist(state).log_prob(action).sum(-1, keepdim=True)

    def sample_n(self, state, n):
        return self.dist(state).rsample((n,))  # n x B x action_dim


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, state, action):
        return self.net(torch.cat([state, action], -1))


def advantage_weight(state, action):
    """exp(A / beta) bounded by max_weight, A = Q(s, a) - mean of Q over policy samples."""
    sampled = actor.sample_n(state, args.num_action_samples)
    state_rep = state.unsqueeze(0).expand(args.num_action_samples, -1, -1)
    value = critic(state_rep, sampled).mean(0)
    advantage = critic(state, action) - value
    return (advantage / args.beta).exp().clamp(max=args.max_weight)


actor = GaussianPolicy()
actor_target = copy.deepcopy(actor)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic = Critic()
critic_target = copy.deepcopy(critic)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    state, action, next_state = states[idx], actions[idx], next_states[idx]
    reward, not_done = rewards[idx], not_dones[idx]

    # critic: TD target from the target policy's sample and the target critic
    with torch.no_grad():
        next_action = actor_target.dist(next_state).sample()
        target_q = reward + not_done * args.discount * critic_target(next_state, next_action)
    critic_loss = 0.5 * F.mse_loss(critic(state, action), target_q)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    # actor: regression onto data actions, weighted by the filtered advantage
    weight = advantage_weight(state, action).detach()
    actor_loss = -(actor.log_prob(state, action) * weight).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()

    # periodic hard update of both targets
    if (step + 1) % args.target_update_period == 0:
        actor_target.load_state_dict(actor.state_dict())
        critic_target.load_state_dict(critic.state_dict())
    if step % 20 == 0:
        print(f"step {step} critic {critic_loss.item():.4f} actor {actor_loss.item():.4f} "
              f"weight {weight.mean().item():.3f}")

if args.out:
    torch.save({**{f"actor.{k}": v for k, v in actor.state_dict().items()},
                **{f"actor_target.{k}": v for k, v in actor_target.state_dict().items()},
                **{f"critic.{k}": v for k, v in critic.state_dict().items()},
                **{f"critic_target.{k}": v for k, v in critic_target.state_dict().items()}}, args.out)
