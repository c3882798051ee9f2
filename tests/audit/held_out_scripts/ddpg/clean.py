"""DDPG at a tiny size, written after Lillicrap et al., "Continuous control with deep
reinforcement learning" (arXiv:1509.02971) and cleanrl's single file
cleanrl/ddpg_continuous_action.py: Gaussian exploration noise on the actor's action, a replay
buffer, the critic's target ``r + gamma * (1 - done) * Q'(s', mu'(s'))`` computed under
``torch.no_grad()`` from the target actor and the target critic, the actor trained by
``-Q(s, mu(s))`` every ``policy_frequency`` steps, then a soft update of both targets. The
environment (a point on a line pushed by a bounded force, reward ``-|x|``) lives in the script
instead of gym. As published: clean."""

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--total-timesteps", type=int, default=60)
parser.add_argument("--learning-rate", type=float, default=3e-3)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--exploration-noise", type=float, default=0.1)
parser.add_argument("--learning-starts", type=int, default=20)
parser.add_argument("--policy-frequency", type=int, default=2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class PushEnv:
    """A point on a line pushed by a force in [-1, 1]; reward -|x|; 15 steps an episode."""

    def reset(self):
        self.x, self.t = float(np.random.uniform(-1, 1)), 0
        return np.array([self.x, 0.0], dtype=np.float32)

    def step(self, action):
        self.x += 0.2 * float(np.clip(action, -1, 1))
        self.t += 1
        return np.array([self.x, self.t / 15], dtype=np.float32), -abs(self.x), self.t >= 15


class QNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 1)

    def forward(self, x, a):
        x = torch.cat([x, a], 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 32)
        self.fc_mu = nn.Linear(32, 1)

    def forward(self, x):
        return torch.tanh(self.fc_mu(F.relu(self.fc1(x))))


env = PushEnv()
actor = Actor()
qf1 = QNetwork()
qf1_target = QNetwork()
target_actor = Actor()
target_actor.load_state_dict(actor.state_dict())
qf1_target.load_state_dict(qf1.state_dict())
q_optimizer = torch.optim.Adam(qf1.parameters(), lr=args.learning_rate)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.learning_rate)
buffer = []

obs = env.reset()
for global_step in range(args.total_timesteps):
    with torch.no_grad():
        action = actor(torch.tensor(obs)[None])[0]
        action += torch.normal(0.0, args.exploration_noise, size=action.shape)
    next_obs, reward, done = env.step(action.numpy()[0])
    buffer.append((obs, action.numpy(), np.float32(reward), next_obs, np.float32(done)))
    obs = env.reset() if done else next_obs

    if global_step > args.learning_starts:
        batch = random.sample(buffer, args.batch_size)
        b_obs, b_act, b_rew, b_next, b_done = (torch.tensor(np.array(x)) for x in zip(*batch))
        with torch.no_grad():
            next_state_actions = target_actor(b_next)
            qf1_next_target = qf1_target(b_next, next_state_actions)
            next_q_value = b_rew + (1 - b_done) * args.gamma * qf1_next_target.view(-1)
        qf1_a_values = qf1(b_obs, b_act).view(-1)
        qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
        q_optimizer.zero_grad()
        qf1_loss.backward()
        q_optimizer.step()

        if global_step % args.policy_frequency == 0:
            actor_loss = -qf1(b_obs, actor(b_obs)).mean()
            actor_optimizer.zero_grad()
            actor_loss.backward()
            actor_optimizer.step()
            for param, target_param in zip(actor.parameters(), target_actor.parameters()):
                target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
            for param, target_param in zip(qf1.parameters(), qf1_target.parameters()):
                target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
        if global_step % 10 == 0:
            print(f"step {global_step} qf1_loss {qf1_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "qf1": qf1.state_dict(),
                "target_actor": target_actor.state_dict(), "qf1_target": qf1_target.state_dict()},
               args.out)
