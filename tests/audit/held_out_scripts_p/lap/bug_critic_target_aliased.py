"""Loss-adjusted prioritized experience replay (LAP) with TD3 at a tiny size, written after
Fujimoto, Meger and Precup, "An Equivalence between Loss Functions and Non-Uniform Sampling in
Experience Replay" (NeurIPS 2020, arXiv:2007.06049), section 5: transitions are sampled with
priority max(|delta|, 1)^alpha, new ones with the largest priority seen, and the critic is
trained without importance weights on the Huber loss with threshold min_priority, which in
expectation under this sampling matches the mean squared error under uniform sampling. With
sfujim/LAP-PAL (https://github.com/sfujim/LAP-PAL, continuous/LAP_TD3.py LAP_TD3.train: the
target action from actor_target with clipped noise and the target value from the smaller of
critic_target's twin heads, all under torch.no_grad(); td_loss1 and td_loss2 the absolute errors
of the twin heads, critic_loss = huber(td_loss1) + huber(td_loss2), critic_optimizer.zero_grad(),
backward and step; then the priority torch.max(td_loss1, td_loss2).clamp(min=min_priority)
.pow(alpha), taken off the graph with .data, given to replay_buffer.update_priority(ind, ...);
every policy_freq iterations the actor's loss -Q1(s, actor(s)).mean() with its own
zero_grad, backward and step, then the soft updates of both target networks; LAP_TD3.__init__:
actor_target and critic_target as copy.deepcopy of the online networks; LAP_TD3.huber: 0.5 x^2
under min_priority and min_priority * x above it; continuous/utils.py
PrioritizedReplayBuffer.add, .sample and .update_priority, which keeps the largest priority seen
and writes each sampled index once). A point in the plane pushed towards the origin made in the
script; short episodes, random actions at first, then the actor's with Gaussian exploration
noise, one training iteration per environment step. Bug: the twin critic's target network is
bound to the online critic, self.critic_target = self.critic, instead of a copy (LAP_TD3.__init__
makes critic_target with copy.deepcopy(self.critic)), so the soft update copies the critic onto
itself and the TD targets under torch.no_grad() are bootstrapped from the critic being trained:
the first update, when the two are equal, is the clean one, and from the second the Huber loss,
the TD errors and the priorities written back chase a target that moves with every step."""

import argparse
import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--max-timesteps", type=int, default=160)
parser.add_argument("--start-timesteps", type=int, default=48)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, max_action, hidden, episode_len = 2, 2, 1.0, 32, 8
expl_noise = 0.1


def env_reset():
    return torch.rand(state_dim) * 3 - 1.5


def env_step(state, action):
    next_state = (state + 0.3 * action).clamp(-2, 2)
    dist = next_state.norm().item()
    return next_state, (1.0 if dist < 0.25 else -dist), dist < 0.25


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(state_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, action_dim)

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return max_action * torch.tanh(self.l3(a))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, 1)
        self.l4 = nn.Linear(state_dim + action_dim, hidden)
        self.l5 = nn.Linear(hidden, hidden)
        self.l6 = nn.Linear(hidden, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


class PrioritizedReplayBuffer:
    def __init__(self, max_size):
        self.ptr, self.size = 0, 0
        self.state = torch.zeros(max_size, state_dim)
        self.action = torch.zeros(max_size, action_dim)
        self.next_state = torch.zeros(max_size, state_dim)
        self.reward = torch.zeros(max_size, 1)
        self.not_done = torch.zeros(max_size, 1)
        self.priority = torch.zeros(max_size)
        self.max_priority = 1.0

    def add(self, state, action, next_state, reward, done):
        self.state[self.ptr], self.action[self.ptr] = state, action
        self.next_state[self.ptr], self.reward[self.ptr] = next_state, reward
        self.not_done[self.ptr] = 1.0 - float(done)
        self.priority[self.ptr] = self.max_priority
        self.ptr, self.size = self.ptr + 1, self.size + 1

    def sample(self, batch_size):
        ind = torch.multinomial(self.priority[:self.size], batch_size, replacement=True)
        return (self.state[ind], self.action[ind], self.next_state[ind], self.reward[ind],
                self.not_done[ind], ind)

    def update_priority(self, ind, priority):
        self.max_priority = max(priority.max().item(), self.max_priority)
        ind, first = np.unique(ind.numpy(), return_index=True)  # each index written once
        self.priority[torch.from_numpy(ind)] = priority[torch.from_numpy(first)]


class LAP_TD3:
    def __init__(self, discount=0.9, tau=0.05, policy_noise=0.2, noise_clip=0.5, policy_freq=2,
                 alpha=0.4, min_priority=1.0):
        self.actor = Actor()
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=args.lr)
        self.critic = Critic()
        self.critic_target = self.critic
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=args.lr)
        self.discount, self.tau = discount, tau
        self.policy_noise, self.noise_clip, self.policy_freq = policy_noise, noise_clip, policy_freq
        self.alpha, self.min_priority = alpha, min_priority
        self.total_it = 0

    def select_action(self, state):
        with torch.no_grad():
            return self.actor(state[None])[0]

    def huber(self, x):
        return torch.where(x < self.min_priority, 0.5 * x.pow(2), self.min_priority * x).mean()

    def train(self, replay_buffer, batch_size):
        self.total_it += 1
        state, action, next_state, reward, not_done, ind = replay_buffer.sample(batch_size)

        with torch.no_grad():
            noise = (torch.randn_like(action) * self.policy_noise).clamp(-self.noise_clip,
                                                                         self.noise_clip)
            next_action = (self.actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_Q1, target_Q2 = self.critic_target(next_state, next_action)
            target_Q = reward + not_done * self.discount * torch.min(target_Q1, target_Q2)

        current_Q1, current_Q2 = self.critic(state, action)
        td_loss1 = (current_Q1 - target_Q).abs()
        td_loss2 = (current_Q2 - target_Q).abs()
        critic_loss = self.huber(td_loss1) + self.huber(td_loss2)

        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # loss-adjusted priorities from the detached TD errors
        priority = torch.max(td_loss1, td_loss2).clamp(min=self.min_priority).pow(self.alpha)
        replay_buffer.update_priority(ind, priority.detach().flatten())

        actor_loss = None
        if self.total_it % self.policy_freq == 0:
            actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()

            with torch.no_grad():
                for param, target_param in zip(self.critic.parameters(),
                                               self.critic_target.parameters()):
                    target_param.copy_(self.tau * param + (1 - self.tau) * target_param)
                for param, target_param in zip(self.actor.parameters(),
                                               self.actor_target.parameters()):
                    target_param.copy_(self.tau * param + (1 - self.tau) * target_param)
        return critic_loss.item(), actor_loss


policy = LAP_TD3()
replay_buffer = PrioritizedReplayBuffer(args.max_timesteps)
state, episode_t, episode_return, episode_num = env_reset(), 0, 0.0, 0
for t in range(args.max_timesteps):
    episode_t += 1
    if t < args.start_timesteps:
        action = torch.rand(action_dim) * 2 * max_action - max_action
    else:
        action = (policy.select_action(state) + torch.randn(action_dim) * max_action * expl_noise
                  ).clamp(-max_action, max_action)
    next_state, reward, done = env_step(state, action)
    replay_buffer.add(state, action, next_state, reward, done)
    state, episode_return = next_state, episode_return + reward

    if t >= args.start_timesteps:
        critic_loss, actor_loss = policy.train(replay_buffer, args.batch_size)

    if done or episode_t == episode_len:
        if t >= args.start_timesteps:
            print(f"t {t + 1} episode {episode_num} return {episode_return:.2f} "
                  f"critic {critic_loss:.3f} max priority {replay_buffer.max_priority:.3f}")
        state, episode_t, episode_return, episode_num = env_reset(), 0, 0.0, episode_num + 1

if args.out:
    torch.save({**{f"actor.{k}": v for k, v in policy.actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in policy.critic.state_dict().items()},
                **{f"actor_target.{k}": v for k, v in policy.actor_target.state_dict().items()},
                **{f"critic_target.{k}": v for k, v in policy.critic_target.state_dict().items()},
                "priority": replay_buffer.priority.clone()}, args.out)
