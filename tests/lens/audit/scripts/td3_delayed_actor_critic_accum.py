"""TD3 with delayed policy updates and an accumulated critic, at a tiny size, written after
Fujimoto, van Hoof and Meger, "Addressing Function Approximation Error in Actor-Critic Methods"
(ICML 2018, arXiv:1802.09477) and sfujim/TD3 (TD3.py, ``TD3.train``: twin critics in one module
with one optimizer, the TD target from the target actor's smoothed action and the minimum of
the target critics under ``torch.no_grad()``, the critic's step on every call; every
``policy_freq`` calls the actor's loss ``-critic.Q1(state, actor(state)).mean()``, its step,
then the soft update of both targets; main.py: one environment step per call, the replay
buffer filled with random actions for the first steps). Here the critic accumulates its
gradient over ``--accum`` updates (3 at the defaults) and steps under ``if (i + 1) % accum ==
0:``, ``zero_grad()`` after the step; on the updates that train the actor (every
``--policy-freq``, 2), the actor's actions for the batch are computed at the start of the
update, before the critic's loss and step, and the actor's loss reads them through the first
critic (held fixed: its parameters set not to require grad) after that step. A point moved on a
plane toward the origin (reward ``-|x|**2``) is the environment, in the script. 12 updates
after 16 random steps. ``--out PATH`` saves the actor's and the critic's state_dicts."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--start-timesteps", type=int, default=16)
parser.add_argument("--accum", type=int, default=3)
parser.add_argument("--policy-freq", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--discount", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--policy-noise", type=float, default=0.2)
parser.add_argument("--noise-clip", type=float, default=0.5)
parser.add_argument("--expl-noise", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, max_action = 2, 2, 1.0


class PointEnv:
    """A point on a plane moved by a bounded action; reward -|x|**2; 8 steps an episode."""

    def reset(self):
        self.x, self.t = 2 * torch.rand(state_dim) - 1, 0
        return self.x.clone()

    def step(self, action):
        self.x = self.x + 0.2 * action.clamp(-max_action, max_action)
        self.t += 1
        return self.x.clone(), -float(self.x.pow(2).sum()), self.t >= 8


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(state_dim, args.hidden)
        self.l2 = nn.Linear(args.hidden, action_dim)

    def forward(self, state):
        return max_action * torch.tanh(self.l2(F.relu(self.l1(state))))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, args.hidden)
        self.l2 = nn.Linear(args.hidden, 1)
        self.l3 = nn.Linear(state_dim + action_dim, args.hidden)
        self.l4 = nn.Linear(args.hidden, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l2(F.relu(self.l1(sa))), self.l4(F.relu(self.l3(sa)))

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l2(F.relu(self.l1(sa)))


class ReplayBuffer:
    def __init__(self):
        self.rows = []

    def add(self, state, action, next_state, reward, done):
        self.rows.append((state, action, next_state, torch.tensor([reward]),
                          torch.tensor([float(not done)])))

    def sample(self, batch_size):
        picked = torch.randint(0, len(self.rows), (batch_size,)).tolist()
        return [torch.stack(column) for column in zip(*(self.rows[k] for k in picked))]


actor = Actor()
actor_target = copy.deepcopy(actor)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-3)
critic = Critic()
critic_target = copy.deepcopy(critic)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-3)

env, replay_buffer = PointEnv(), ReplayBuffer()
state = env.reset()


def env_step(action):
    global state
    next_state, reward, done = env.step(action)
    replay_buffer.add(state, action, next_state, reward, done)
    state = env.reset() if done else next_state


for _ in range(args.start_timesteps):
    env_step(2 * max_action * torch.rand(action_dim) - max_action)

for i in range(args.iters):
    with torch.no_grad():
        action = actor(state[None])[0]
    env_step((action + args.expl_noise * torch.randn(action_dim)).clamp(-max_action, max_action))

    b_state, b_action, b_next_state, b_reward, b_not_done = replay_buffer.sample(args.batch_size)
    train_actor = (i + 1) % args.policy_freq == 0
    if train_actor:
        pi = actor(b_state)

    with torch.no_grad():
        noise = (torch.randn_like(b_action) * args.policy_noise).clamp(-args.noise_clip,
                                                                       args.noise_clip)
        next_action = (actor_target(b_next_state) + noise).clamp(-max_action, max_action)
        target_Q1, target_Q2 = critic_target(b_next_state, next_action)
        target_Q = b_reward + b_not_done * args.discount * torch.min(target_Q1, target_Q2)
    current_Q1, current_Q2 = critic(b_state, b_action)
    critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
    (critic_loss / args.accum).backward()
    if (i + 1) % args.accum == 0:
        critic_optimizer.step()
        critic_optimizer.zero_grad()

    if train_actor:
        for p in critic.parameters():
            p.requires_grad = False
        actor_loss = -critic.Q1(b_state, pi).mean()
        actor_loss.backward()
        for p in critic.parameters():
            p.requires_grad = True
        actor_optimizer.step()
        actor_optimizer.zero_grad()
        with torch.no_grad():
            for p, tp in zip(critic.parameters(), critic_target.parameters()):
                tp.mul_(1 - args.tau).add_(args.tau * p)
            for p, tp in zip(actor.parameters(), actor_target.parameters()):
                tp.mul_(1 - args.tau).add_(args.tau * p)
        print(f"update {i + 1}: critic {critic_loss.item():.4f} actor {actor_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
