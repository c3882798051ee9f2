"""TD3+BC at a tiny size, written after Fujimoto and Gu, "A Minimalist Approach to Offline
Reinforcement Learning" (NeurIPS 2021, arXiv:2106.06860), section 5 and algorithm 1, with the
authors' sfujim/TD3_BC (https://github.com/sfujim/TD3_BC, TD3_BC.py: Actor, Critic with Q1, and
TD3_BC.train; main.py: the states normalised by the dataset's mean and standard deviation). Offline:
a fixed dataset of a point-reaching task, made in the script by a behaviour policy that is a noisy
scripted controller half of the time and uniform noise otherwise. Each iteration trains the twin
critics on the clipped double-Q target r + gamma * min(Q1', Q2')(s', pi'(s') + clipped noise),
computed under torch.no_grad() from the target actor and the target critic (deep copies of the
actor and the critic); every policy_freq iterations (delayed updates) the actor maximises
lambda * Q1(s, pi(s)) minus the squared distance to the dataset's action, with
lambda = alpha / mean|Q1(s, pi(s))| detached (a number that rescales the Q term, as in the
reference's `lmbda = self.alpha/Q.abs().mean().detach()`), and both targets follow by a Polyak
update. Injected bug: lambda is taken without .detach() (lmbda = alpha / q.abs().mean(), for the
reference's alpha / Q.abs().mean().detach()), so the actor's loss also differentiates the
normaliser: the Q term's gradient becomes that of alpha * mean(Q) / mean|Q|, which vanishes
whenever the batch's Q values share one sign (here, with negative rewards, they are negative at
every actor update), and the actor is trained by the behaviour-cloning term alone, not towards Q."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--policy-noise", type=float, default=0.2)
parser.add_argument("--noise-clip", type=float, default=0.5)
parser.add_argument("--policy-freq", type=int, default=2)
parser.add_argument("--alpha", type=float, default=2.5)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden_dim, max_action = 4, 2, 64, 1.0
n_episodes, horizon = 64, 8


def make_dataset():
    """Transitions (s, a, s', r, not_done); the state holds the point and its goal."""
    states = 2 * torch.rand(n_episodes, state_dim) - 1
    expert = torch.rand(n_episodes, 1) < 0.5
    data = []
    for _ in range(horizon):
        scripted = (2.0 * (states[:, 2:] - states[:, :2]) + 0.3 * torch.randn(n_episodes, 2))
        random = 2 * torch.rand(n_episodes, action_dim) - 1
        actions = torch.where(expert, scripted, random).clamp(-max_action, max_action)
        position = (states[:, :2] + 0.3 * actions).clamp(-1, 1)
        next_states = torch.cat([position, states[:, 2:]], dim=1)
        rewards = -(position - states[:, 2:]).norm(dim=1, keepdim=True)
        data.append((states, actions, next_states, rewards, torch.ones(n_episodes, 1)))
        states = next_states
    return [torch.cat(parts) for parts in zip(*data)]


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(state_dim, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, action_dim))

    def forward(self, state):
        return max_action * torch.tanh(self.net(state))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1 = nn.Sequential(nn.Linear(state_dim + action_dim, hidden_dim), nn.ReLU(),
                                nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                nn.Linear(hidden_dim, 1))
        self.q2 = nn.Sequential(nn.Linear(state_dim + action_dim, hidden_dim), nn.ReLU(),
                                nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                nn.Linear(hidden_dim, 1))

    def forward(self, state, action):
        sa = torch.cat([state, action], dim=1)
        return self.q1(sa), self.q2(sa)

    def Q1(self, state, action):
        return self.q1(torch.cat([state, action], dim=1))


states, actions, next_states, rewards, not_dones = make_dataset()
mean, std = states.mean(0, keepdim=True), states.std(0, keepdim=True) + 1e-3
states, next_states = (states - mean) / std, (next_states - mean) / std

actor = Actor()
actor_target = copy.deepcopy(actor)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic = Critic()
critic_target = copy.deepcopy(critic)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)

for it in range(1, args.iterations + 1):
    idx = torch.randint(0, len(states), (args.batch_size,))
    state, action, next_state = states[idx], actions[idx], next_states[idx]
    reward, not_done = rewards[idx], not_dones[idx]

    with torch.no_grad():
        noise = (torch.randn_like(action) * args.policy_noise).clamp(-args.noise_clip,
                                                                     args.noise_clip)
        next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
        target_q1, target_q2 = critic_target(next_state, next_action)
        target_q = reward + not_done * args.discount * torch.min(target_q1, target_q2)

    current_q1, current_q2 = critic(state, action)
    critic_loss = F.mse_loss(current_q1, target_q) + F.mse_loss(current_q2, target_q)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    if it % args.policy_freq == 0:
        pi = actor(state)
        q = critic.Q1(state, pi)
        lmbda = args.alpha / q.abs().mean()
        actor_loss = -lmbda * q.mean() + F.mse_loss(pi, action)
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()

        with torch.no_grad():
            for param, target_param in zip(critic.parameters(), critic_target.parameters()):
                target_param.copy_(args.tau * param + (1 - args.tau) * target_param)
            for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                target_param.copy_(args.tau * param + (1 - args.tau) * target_param)
        print(f"iteration {it} critic {critic_loss.item():.4f} actor {actor_loss.item():.4f} "
              f"lambda {lmbda.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "actor_target": actor_target.state_dict(),
                "critic_target": critic_target.state_dict()}, args.out)
