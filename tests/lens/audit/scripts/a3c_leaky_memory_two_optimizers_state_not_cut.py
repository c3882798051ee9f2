"""An advantage actor-critic with a recurrent memory carried from rollout to rollout, at a tiny
size, written after Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning" (ICML
2016, arXiv:1602.01783) and ikostrikov/pytorch-a3c (train.py, ``train``: rollouts of
``num_steps`` steps; before each rollout the recurrent state is reset to zeros if the episode
ended and otherwise kept, cut from the graph of the rollouts before; n-step returns bootstrapped
from the value of the last state, the value loss ``0.5 * advantage ** 2``, the policy loss on
the log-probabilities with generalized advantage estimation and an entropy bonus). Here the
actor and the critic are two networks with an optimizer each: the actor's memory is a leaky
integrator (``h = keep * h + (1 - keep) * tanh(W obs)``, the rate ``keep`` learned), the
critic reads the actor's memory cut from it. Each rollout the critic's loss comes first and
the critic steps; the actor's loss then reads the log-probabilities and entropies made during
the rollout, before the critic's step. The actor accumulates over ``--accum`` rollouts (2 at the
defaults) and steps under ``if (i + 1) % accum == 0:``; ``zero_grad()`` follows each step. The
actor's backward keeps its graph (``retain_graph=True``). The environment, in the script: a
hidden sign that flips now and then, seen through noise; the reward is 1 when the action names
it. Episodes of 12 steps, rollouts of 4: 16 rollouts. ``--out PATH`` saves both networks'
state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--rollouts", type=int, default=16)
parser.add_argument("--num-steps", type=int, default=4)
parser.add_argument("--max-episode-length", type=int, default=12)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--gae-lambda", type=float, default=0.95)
parser.add_argument("--entropy-coef", type=float, default=0.01)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)


class NoisySignEnv:
    """A hidden sign that flips with probability 0.1 a step, observed with noise."""

    def reset(self):
        self.sign, self.t = int(torch.randint(0, 2, ())), 0
        return self.observe()

    def observe(self):
        return torch.tensor([[2.0 * self.sign - 1.0 + float(torch.randn(())), 1.0]])

    def step(self, action):
        reward = float(action == self.sign)
        if torch.rand(()) < 0.1:
            self.sign = 1 - self.sign
        self.t += 1
        return self.observe(), reward, self.t >= args.max_episode_length


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(2, args.hidden)
        self.decay = nn.Parameter(torch.zeros(args.hidden))
        self.pi = nn.Linear(args.hidden, 2)

    def forward(self, obs, h):
        keep = torch.sigmoid(self.decay)
        h = keep * h + (1 - keep) * torch.tanh(self.inp(obs))
        return self.pi(h), h


actor = Actor()
critic = nn.Sequential(nn.Linear(args.hidden, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1))
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)

env = NoisySignEnv()
state = env.reset()
done = True
h = torch.zeros(1, args.hidden)

for i in range(args.rollouts):
    h = torch.zeros(1, args.hidden) if done else h
    values, log_probs, entropies, rewards = [], [], [], []
    for _ in range(args.num_steps):
        logit, h = actor(state, h)
        value = critic(h.detach())
        prob = F.softmax(logit, dim=-1)
        log_prob = F.log_softmax(logit, dim=-1)
        entropies.append(-(log_prob * prob).sum(1))
        action = prob.multinomial(num_samples=1).detach()
        log_probs.append(log_prob.gather(1, action))
        state, reward, done = env.step(int(action))
        if done:
            state = env.reset()
        values.append(value)
        rewards.append(reward)
        if done:
            break

    R = torch.zeros(1, 1)
    if not done:
        with torch.no_grad():
            R = critic(h)
    values.append(R)

    # the critic: n-step returns
    value_loss = 0
    for k in reversed(range(len(rewards))):
        R = args.gamma * R + rewards[k]
        value_loss = value_loss + 0.5 * (R - values[k]).pow(2)
    value_loss.sum().backward()
    critic_optimizer.step()
    critic_optimizer.zero_grad()

    # the actor: generalized advantage estimation
    policy_loss = 0
    gae = torch.zeros(1, 1)
    for k in reversed(range(len(rewards))):
        delta_t = rewards[k] + args.gamma * values[k + 1].detach() - values[k].detach()
        gae = gae * args.gamma * args.gae_lambda + delta_t
        policy_loss = policy_loss - log_probs[k] * gae - args.entropy_coef * entropies[k]
    (policy_loss.sum() / args.accum).backward(retain_graph=True)
    if (i + 1) % args.accum == 0:
        actor_optimizer.step()
        actor_optimizer.zero_grad()
        print(f"rollout {i + 1}: value loss {value_loss.item():.4f} "
              f"policy loss {policy_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
