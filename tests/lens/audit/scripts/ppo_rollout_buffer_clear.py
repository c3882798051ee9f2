"""Proximal policy optimization with a rollout buffer of tensors without graph, at a tiny size,
written after nikhilbarhate99/PPO-PyTorch (PPO.py: ``RolloutBuffer`` holds lists of states,
actions, log-probabilities, state values, rewards and terminal flags; ``select_action`` runs the
old policy under ``torch.no_grad()`` and appends to the buffer; ``update`` computes the
normalised Monte Carlo returns, evaluates the stored states and actions with the current policy
for ``K_epochs`` epochs, minimising the clipped surrogate, half the value's squared error and
minus 0.01 times the entropy, copies the policy into the old policy and empties the buffer with
``clear``, its ``del`` of every list) and Schulman et al., "Proximal Policy Optimization
Algorithms" (arXiv:1707.06347). The buffer's entries carry no graph; each epoch's loss is made
from a fresh evaluation. The actor and the critic: two linear layers with tanh each, one Adam
with a learning rate per network. The environment, in the script: a chain of 6 cells, start at
the left end, reward 1 at the right end and -0.1 a step, at most 8 steps. An update every 16
steps, 3 epochs each, 64 steps. ``--out PATH`` saves the policy's state_dict."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--max-training-timesteps", type=int, default=64)
parser.add_argument("--update-timestep", type=int, default=16)
parser.add_argument("--k-epochs", type=int, default=3)
parser.add_argument("--cells", type=int, default=6)
parser.add_argument("--max-ep-len", type=int, default=8)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--eps-clip", type=float, default=0.2)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--lr-actor", type=float, default=3e-3)
parser.add_argument("--lr-critic", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)


class RolloutBuffer:
    def __init__(self):
        self.actions = []
        self.states = []
        self.logprobs = []
        self.rewards = []
        self.state_values = []
        self.is_terminals = []

    def clear(self):
        del self.actions[:]
        del self.states[:]
        del self.logprobs[:]
        del self.rewards[:]
        del self.state_values[:]
        del self.is_terminals[:]


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(args.cells, args.hidden), nn.Tanh(),
                                   nn.Linear(args.hidden, 2), nn.Softmax(dim=-1))
        self.critic = nn.Sequential(nn.Linear(args.cells, args.hidden), nn.Tanh(),
                                    nn.Linear(args.hidden, 1))

    def act(self, state):
        dist = Categorical(self.actor(state))
        action = dist.sample()
        return action.detach(), dist.log_prob(action).detach(), self.critic(state).detach()

    def evaluate(self, state, action):
        dist = Categorical(self.actor(state))
        return dist.log_prob(action), self.critic(state), dist.entropy()


buffer = RolloutBuffer()
policy = ActorCritic()
optimizer = torch.optim.Adam([
    {"params": policy.actor.parameters(), "lr": args.lr_actor},
    {"params": policy.critic.parameters(), "lr": args.lr_critic},
])
policy_old = ActorCritic()
policy_old.load_state_dict(policy.state_dict())
mse = nn.MSELoss()


def select_action(state):
    with torch.no_grad():
        action, logprob, value = policy_old.act(state)
    buffer.states.append(state)
    buffer.actions.append(action)
    buffer.logprobs.append(logprob)
    buffer.state_values.append(value)
    return action.item()


def update():
    rewards, discounted = [], 0.0
    for reward, is_terminal in zip(reversed(buffer.rewards), reversed(buffer.is_terminals)):
        if is_terminal:
            discounted = 0.0
        discounted = reward + args.gamma * discounted
        rewards.insert(0, discounted)
    rewards = torch.tensor(rewards)
    rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-7)
    old_states = torch.stack(buffer.states).detach()
    old_actions = torch.stack(buffer.actions).detach()
    old_logprobs = torch.stack(buffer.logprobs).detach()
    old_state_values = torch.cat(buffer.state_values).detach()
    advantages = rewards - old_state_values
    for _ in range(args.k_epochs):
        logprobs, state_values, dist_entropy = policy.evaluate(old_states, old_actions)
        state_values = state_values.squeeze(-1)
        ratios = torch.exp(logprobs - old_logprobs)
        surr1 = ratios * advantages
        surr2 = torch.clamp(ratios, 1 - args.eps_clip, 1 + args.eps_clip) * advantages
        loss = -torch.min(surr1, surr2) + 0.5 * mse(state_values, rewards) - 0.01 * dist_entropy
        optimizer.zero_grad()
        loss.mean().backward()
        optimizer.step()
    policy_old.load_state_dict(policy.state_dict())
    buffer.clear()


time_step, i_episode = 0, 0
while time_step < args.max_training_timesteps:
    cell, ep_reward = 0, 0.0
    for t in range(1, args.max_ep_len + 1):
        action = select_action(F.one_hot(torch.tensor(cell), args.cells).float())
        cell = max(0, cell + (1 if action == 1 else -1))
        done = cell == args.cells - 1
        reward = 1.0 if done else -0.1
        buffer.rewards.append(reward)
        buffer.is_terminals.append(done or t == args.max_ep_len)
        time_step += 1
        ep_reward += reward
        if time_step % args.update_timestep == 0:
            update()
        if done:
            break
    print(f"episode {i_episode}: reward {ep_reward:.2f} timestep {time_step}")
    i_episode += 1

if args.out:
    torch.save({"policy": policy.state_dict()}, args.out)
