"""Ensemble-Diversified Actor Critic (EDAC) for offline RL at a tiny size, written after An, Moon,
Kim and Song, "Uncertainty-Based Offline Reinforcement Learning with Diversified Q-Ensemble"
(NeurIPS 2021, arXiv:2110.01548), algorithm 1: soft actor-critic on a fixed data set with an
ensemble of N Q functions whose minimum both makes the TD target and scores the actor's actions,
plus a gradient-diversity term, eta / (N - 1) times the mean over the batch of the summed pairwise
cosine similarities between the members' action-gradients grad_a Q_i(s, a) at the data actions,
which the critics minimise so that their gradients disagree off the data and the minimum
penalises out-of-distribution actions with fewer members. With snu-mllab/EDAC
(https://github.com/snu-mllab/EDAC, lifelong_rl/trainers/q_learning/sac.py
SACTrainer.train_from_torch: the data actions are tiled over the ensemble with requires_grad,
torch.autograd.grad of the summed ensemble output with respect to them with retain_graph=True
and create_graph=True, normalised, a batched Gram matrix with its diagonal masked out, summed,
averaged and divided by N - 1, then added, times eta, to the summed per-member TD losses; the
alpha, policy and Q-ensemble steps in that order, each after its own zero_grad; soft target
update) and its PyTorch reimplementation tinkoff-ai/CORL (https://github.com/tinkoff-ai/CORL,
algorithms/offline/edac.py: VectorizedLinear and VectorizedCritic for the ensemble,
EDAC._critic_diversity_loss as above, EDAC._alpha_loss on a log-probability taken under
torch.no_grad(), EDAC._actor_loss as alpha * log pi - min_i Q_i with alpha detached,
EDAC._critic_loss with a TD target under torch.no_grad(), and EDAC.update: alpha, actor, critic,
each step preceded by its optimizer's zero_grad, then soft_update of the target critic). The
data: a point mass on the plane logged by a narrow, biased behaviour policy, made in the script.
Bug: the members' action-gradients are taken without create_graph=True, grads =
torch.autograd.grad(q_rep.sum(), action_rep, retain_graph=True) (snu-mllab/EDAC's
SACTrainer.train_from_torch and CORL's EDAC._critic_diversity_loss pass create_graph=True), so
the gradients come back as constants with no graph to the critic's weights: the diversity loss
is still computed, printed and added to the critic loss, but adds nothing to the critic's
gradient, and the ensemble is trained as plain SAC-N, whose members' action-gradients are left
to align, so the ensemble minimum barely penalises actions off the data."""

import argparse
import copy
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--num-critics", type=int, default=5)
parser.add_argument("--eta", type=float, default=1.0)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden = 2, 2, 32

# offline data: a point mass stepped towards the origin by a narrow, biased behaviour policy
n_data = 2000
states = torch.rand(n_data, state_dim) * 4 - 2
actions = torch.tanh(-0.5 * states + torch.tensor([0.3, 0.0]) + 0.1 * torch.randn(n_data, action_dim))
next_states = states + 0.4 * actions
rewards = -next_states.norm(dim=1, keepdim=True) - 0.1 * actions.pow(2).sum(1, keepdim=True)
dones = (next_states.norm(dim=1, keepdim=True) < 0.2).float()


class EnsembleLinear(nn.Module):
    """N independent linear layers applied to an N x B x in input at once."""

    def __init__(self, n, fan_in, fan_out):
        super().__init__()
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = nn.Parameter(torch.empty(n, fan_in, fan_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(n, 1, fan_out).uniform_(-bound, bound))

    def forward(self, x):
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleCritic(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n
        self.net = nn.Sequential(EnsembleLinear(n, state_dim + action_dim, hidden), nn.ReLU(),
                                 EnsembleLinear(n, hidden, hidden), nn.ReLU(),
                                 EnsembleLinear(n, hidden, 1))

    def forward(self, state, action):
        sa = torch.cat([state, action], -1)
        if sa.dim() == 2:
            sa = sa.unsqueeze(0).expand(self.n, -1, -1)
        return self.net(sa).squeeze(-1)  # N x B


class TanhGaussianActor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU())
        self.mu, self.log_sigma = nn.Linear(hidden, action_dim), nn.Linear(hidden, action_dim)

    def forward(self, state):
        h = self.body(state)
        dist = torch.distributions.Normal(self.mu(h), self.log_sigma(h).clamp(-5.0, 2.0).exp())
        pre = dist.rsample()
        action = torch.tanh(pre)
        log_prob = dist.log_prob(pre).sum(-1) - torch.log(1 - action.pow(2) + 1e-6).sum(-1)
        return action, log_prob


def diversity_loss(state, action):
    """Mean pairwise cosine similarity of the members' action-gradients, off the diagonal."""
    n = critic.n
    state_rep = state.unsqueeze(0).expand(n, -1, -1)
    action_rep = action.unsqueeze(0).repeat(n, 1, 1).requires_grad_(True)
    q_rep = critic(state_rep, action_rep)
    grads, = torch.autograd.grad(q_rep.sum(), action_rep, retain_graph=True)
    grads = grads / (grads.norm(dim=2, keepdim=True) + 1e-10)
    grads = grads.transpose(0, 1)  # B x N x action_dim
    cosine = grads @ grads.transpose(1, 2)  # B x N x N
    off_diagonal = cosine * (1 - torch.eye(n))
    return off_diagonal.sum((1, 2)).mean() / (n - 1)


actor = TanhGaussianActor()
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic = EnsembleCritic(args.num_critics)
critic_target = copy.deepcopy(critic)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
log_alpha = torch.zeros(1, requires_grad=True)
alpha_optimizer = torch.optim.Adam([log_alpha], lr=1e-3)
target_entropy = -float(action_dim)

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    state, action, next_state = states[idx], actions[idx], next_states[idx]
    reward, done = rewards[idx].squeeze(1), dones[idx].squeeze(1)

    # temperature
    with torch.no_grad():
        _, log_pi = actor(state)
    alpha_loss = -(log_alpha * (log_pi + target_entropy)).mean()
    alpha_optimizer.zero_grad()
    alpha_loss.backward()
    alpha_optimizer.step()
    alpha = log_alpha.exp().detach()

    # actor: maximise the ensemble minimum plus entropy
    pi_action, log_pi = actor(state)
    q_pi = critic(state, pi_action).min(0)[0]
    actor_loss = (alpha * log_pi - q_pi).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()

    # critic ensemble: TD to the clipped soft target plus the gradient-diversity term
    with torch.no_grad():
        next_action, next_log_pi = actor(next_state)
        next_q = critic_target(next_state, next_action).min(0)[0] - alpha * next_log_pi
        target_q = reward + args.discount * (1 - done) * next_q
    q = critic(state, action)
    td_loss = (q - target_q.unsqueeze(0)).pow(2).mean(1).sum()
    div_loss = diversity_loss(state, action)
    critic_loss = td_loss + args.eta * div_loss
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    with torch.no_grad():
        for p, tp in zip(critic.parameters(), critic_target.parameters()):
            tp.mul_(1 - args.tau).add_(args.tau * p)
    if step % 10 == 0:
        print(f"step {step} td {td_loss.item():.4f} div {div_loss.item():.4f} "
              f"actor {actor_loss.item():.4f} alpha {alpha.item():.4f}")

if args.out:
    torch.save({**{f"actor.{k}": v for k, v in actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in critic.state_dict().items()},
                **{f"critic_target.{k}": v for k, v in critic_target.state_dict().items()},
                "log_alpha": log_alpha.detach().clone()}, args.out)
