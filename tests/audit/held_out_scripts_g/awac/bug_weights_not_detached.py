"""Advantage-weighted actor-critic at a tiny size, written after Nair, Gupta, Dalal and Levine,
"AWAC: Accelerating Online Reinforcement Learning with Offline Datasets" (arXiv:2006.09359),
section 4 and algorithm 1, with rail-berkeley/rlkit (https://github.com/rail-berkeley/rlkit,
rlkit/torch/sac/awac_trainer.py AWACTrainer.train_from_torch: the advantage Q(s, a) - V(s), with
V(s) read at an action the policy samples, turned into weights used as ``weights.detach()`` in the
policy's loss) and the PyTorch layout of tinkoff-ai/CORL (https://github.com/tinkoff-ai/CORL,
algorithms/offline/awac.py: Actor, Critic, AdvantageWeightedActorCritic, the weights
exp(A / lambda) clipped at exp_adv_max, one Adam per network). Two critics are trained by TD
against the smaller of two target critics (deep copies, Polyak-averaged after each update) at
actions the actor samples for the next states, the whole target under torch.no_grad(); then the
Gaussian actor is trained by the log-likelihood of the data's actions weighted by the advantage
weights, cut from the graph, so that they are constants of the actor's loss and it trains neither
the critics nor the actor through V(s). Offline transitions of a small point-reaching task with a
noisy scripted behaviour policy, made in the script. Injected bug: the advantage weights enter the
actor's loss without .detach(), so the actor is also trained through the weights, by V(s) = Q(s, pi(s))
at its own reparameterised action, and the actor's loss writes gradients into the critics."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=5e-3)
parser.add_argument("--awac-lambda", type=float, default=1.0)
parser.add_argument("--exp-adv-max", type=float, default=100.0)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden_dim, n_transitions = 4, 2, 32, 512


def make_dataset(n):
    """A point in the plane moved by its action towards a goal; the state holds point and goal."""
    position = 2 * torch.rand(n, 2) - 1
    goal = 2 * torch.rand(n, 2) - 1
    actions = (goal - position + 0.3 * torch.randn(n, 2)).clamp(-1, 1)
    next_position = (position + 0.5 * actions).clamp(-1, 1)
    distance = (next_position - goal).norm(dim=1, keepdim=True)
    rewards = -distance
    dones = (distance < 0.1).float()
    return (torch.cat([position, goal], 1), actions, rewards,
            torch.cat([next_position, goal], 1), dones)


class Actor(nn.Module):
    def __init__(self, min_log_std=-20.0, max_log_std=2.0, min_action=-1.0, max_action=1.0):
        super().__init__()
        self._mlp = nn.Sequential(nn.Linear(state_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, action_dim))
        self._log_std = nn.Parameter(torch.zeros(action_dim))
        self._min_log_std, self._max_log_std = min_log_std, max_log_std
        self._min_action, self._max_action = min_action, max_action

    def _get_policy(self, state):
        mean = self._mlp(state)
        log_std = self._log_std.clamp(self._min_log_std, self._max_log_std)
        return torch.distributions.Normal(mean, log_std.exp())

    def log_prob(self, state, action):
        return self._get_policy(state).log_prob(action).sum(-1, keepdim=True)

    def forward(self, state):
        policy = self._get_policy(state)
        action = policy.rsample().clamp(self._min_action, self._max_action)
        return action, policy.log_prob(action).sum(-1, keepdim=True)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self._mlp = nn.Sequential(nn.Linear(state_dim + action_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, 1))

    def forward(self, state, action):
        return self._mlp(torch.cat([state, action], dim=-1))


def soft_update(target, source, tau):
    for target_param, source_param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_((1 - tau) * target_param.data + tau * source_param.data)


dataset = make_dataset(n_transitions)
actor = Actor()
critic_1, critic_2 = Critic(), Critic()
target_critic_1, target_critic_2 = copy.deepcopy(critic_1), copy.deepcopy(critic_2)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_1_optimizer = torch.optim.Adam(critic_1.parameters(), lr=args.lr)
critic_2_optimizer = torch.optim.Adam(critic_2.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    states, actions, rewards, next_states, dones = (t[idx] for t in dataset)
    # critics: TD against the target critics
    with torch.no_grad():
        next_actions, _ = actor(next_states)
        q_next = torch.min(target_critic_1(next_states, next_actions),
                           target_critic_2(next_states, next_actions))
        q_target = rewards + args.gamma * (1.0 - dones) * q_next
    critic_loss = (F.mse_loss(critic_1(states, actions), q_target)
                   + F.mse_loss(critic_2(states, actions), q_target))
    critic_1_optimizer.zero_grad()
    critic_2_optimizer.zero_grad()
    critic_loss.backward()
    critic_1_optimizer.step()
    critic_2_optimizer.step()
    # actor: advantage-weighted log-likelihood of the data's actions
    pi_action, _ = actor(states)
    v = torch.min(critic_1(states, pi_action), critic_2(states, pi_action))
    q = torch.min(critic_1(states, actions), critic_2(states, actions))
    adv = q - v
    weights = torch.clamp_max(torch.exp(adv / args.awac_lambda), args.exp_adv_max)
    actor_loss = (-actor.log_prob(states, actions) * weights).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    soft_update(target_critic_1, critic_1, args.tau)
    soft_update(target_critic_2, critic_2, args.tau)
    print(f"step {step} critic {critic_loss.item():.4f} actor {actor_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic_1": critic_1.state_dict(),
                "critic_2": critic_2.state_dict(), "target_critic_1": target_critic_1.state_dict(),
                "target_critic_2": target_critic_2.state_dict()}, args.out)
