"""PPO with a clipped objective at a tiny size, written after Schulman et al., "Proximal Policy
Optimization Algorithms" (arXiv:1707.06347) and the single-file loop of vwxyzjn/cleanrl
(https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/ppo.py): a rollout collected under
``torch.no_grad()``, GAE advantages, several epochs of shuffled minibatches with the clipped
surrogate ``max(-A r, -A clip(r))``, a value loss and an entropy bonus, ``clip_grad_norm_`` and
Adam. One environment (a corridor of six cells, reward at the right end) lives in the script
instead of gym. Injected bug: ``optimizer.zero_grad()`` is left out of the minibatch loop, so
every update adds the gradients of all the earlier minibatches (clipped together) to its own."""

import argparse
import random

import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--num-iterations", type=int, default=3)
parser.add_argument("--num-steps", type=int, default=32)
parser.add_argument("--update-epochs", type=int, default=2)
parser.add_argument("--num-minibatches", type=int, default=2)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--gae-lambda", type=float, default=0.95)
parser.add_argument("--clip-coef", type=float, default=0.2)
parser.add_argument("--ent-coef", type=float, default=0.01)
parser.add_argument("--vf-coef", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class Corridor:
    """Six cells; action 1 moves right, 0 left; reward 1 at the right end, which ends it."""

    def reset(self):
        self.pos, self.t = 0, 0
        return np.eye(6, dtype=np.float32)[self.pos]

    def step(self, action):
        self.pos = min(5, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        self.t += 1
        done = self.pos == 5 or self.t >= 16
        return np.eye(6, dtype=np.float32)[self.pos], float(self.pos == 5), done


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1))
        self.actor = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 2))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


env = Corridor()
agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-3, eps=1e-5)
obs = torch.zeros(args.num_steps, 6)
actions = torch.zeros(args.num_steps, dtype=torch.long)
logprobs = torch.zeros(args.num_steps)
rewards = torch.zeros(args.num_steps)
dones = torch.zeros(args.num_steps)
values = torch.zeros(args.num_steps)
batch_size = args.num_steps
minibatch_size = batch_size // args.num_minibatches

next_obs, next_done = torch.tensor(env.reset()), torch.tensor(0.0)
for iteration in range(1, args.num_iterations + 1):
    for step in range(args.num_steps):
        obs[step], dones[step] = next_obs, next_done
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        values[step], actions[step], logprobs[step] = value.squeeze(), action, logprob
        o, reward, done = env.step(action.item())
        rewards[step] = reward
        next_obs, next_done = torch.tensor(env.reset() if done else o), torch.tensor(float(done))

    with torch.no_grad():
        next_value = agent.get_value(next_obs).squeeze()
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0.0
        for t in reversed(range(args.num_steps)):
            if t == args.num_steps - 1:
                nextnonterminal, nextvalues = 1.0 - next_done, next_value
            else:
                nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
            delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
            lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            advantages[t] = lastgaelam
        returns = advantages + values

    b_inds = np.arange(batch_size)
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, batch_size, minibatch_size):
            mb_inds = torch.as_tensor(b_inds[start:start + minibatch_size])
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(obs[mb_inds],
                                                                          actions[mb_inds])
            ratio = (newlogprob - logprobs[mb_inds]).exp()
            mb_advantages = advantages[mb_inds]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
            pg_loss = torch.max(pg_loss1, pg_loss2).mean()
            v_loss = 0.5 * ((newvalue.view(-1) - returns[mb_inds]) ** 2).mean()
            loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
    print(f"iteration {iteration} loss {loss.item():.4f} return {rewards.sum().item():.0f}")

if args.out:
    torch.save(agent.state_dict(), args.out)
