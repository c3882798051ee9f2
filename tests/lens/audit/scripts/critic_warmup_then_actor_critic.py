"""An actor-critic whose critic is warmed up first with the actor fixed, in two loops, each with
its own lists made for each episode, at a tiny size, written after Bahdanau et al., "An
Actor-Critic Algorithm for Sequence Prediction" (ICLR 2017, arXiv:1607.07086, section 3 and
Algorithm 2: the critic is pre-trained on episodes of the fixed actor before both are trained
together) and pytorch/examples (reinforcement_learning/actor_critic.py: the episode's
log-probabilities, values and rewards collected during the episode and read by the loss at its
end). The warm-up loop samples the actor's actions under ``torch.no_grad()``, collects the
critic's values in ``values`` made for each episode, and regresses them on the discounted
returns with the critic's optimizer. The main loop makes ``log_probs``, ``values`` and
``rewards`` anew for each episode; at its end the critic's squared error and the policy's loss
with the advantage ``G - v.detach()`` are backpropagated together and both optimizers step.
The actor and the critic: two linear layers with tanh each. The environment, in the script: a
chain of 5 cells, start at the left end, reward -1 a step until the right end, at most 8
steps. 6 warm-up episodes, then 10 episodes. ``--out PATH`` saves both state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-episodes", type=int, default=6)
parser.add_argument("--episodes", type=int, default=10)
parser.add_argument("--cells", type=int, default=5)
parser.add_argument("--max-steps", type=int, default=8)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--actor-lr", type=float, default=1e-2)
parser.add_argument("--critic-lr", type=float, default=2e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

actor = nn.Sequential(nn.Linear(args.cells, args.hidden), nn.Tanh(),
                      nn.Linear(args.hidden, 2))
critic = nn.Sequential(nn.Linear(args.cells, args.hidden), nn.Tanh(),
                       nn.Linear(args.hidden, 1))
actor_optimizer = optim.Adam(actor.parameters(), lr=args.actor_lr)
critic_optimizer = optim.Adam(critic.parameters(), lr=args.critic_lr)


def observe(cell):
    return F.one_hot(torch.tensor(cell), args.cells).float()


def move(cell, action):
    cell = max(0, cell + (1 if action == 1 else -1))
    return cell, -1.0, cell == args.cells - 1


def discounted(rewards):
    R, returns = 0.0, []
    for r in rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    return torch.tensor(returns)


# warm-up: the critic alone, on episodes of the fixed actor
for episode in range(args.warmup_episodes):
    values, rewards = [], []
    cell = 0
    for _ in range(args.max_steps):
        state = observe(cell)
        with torch.no_grad():
            action = Categorical(logits=actor(state)).sample()
        values.append(critic(state))
        cell, reward, done = move(cell, int(action))
        rewards.append(reward)
        if done:
            break
    critic_loss = F.mse_loss(torch.cat(values), discounted(rewards))
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    print(f"warm-up {episode}: critic loss {critic_loss.item():.4f}")

# both together
for episode in range(args.episodes):
    log_probs, values, rewards = [], [], []
    cell = 0
    for _ in range(args.max_steps):
        state = observe(cell)
        m = Categorical(logits=actor(state))
        action = m.sample()
        log_probs.append(m.log_prob(action))
        values.append(critic(state))
        cell, reward, done = move(cell, int(action))
        rewards.append(reward)
        if done:
            break
    returns = discounted(rewards)
    v = torch.cat(values)
    critic_loss = F.mse_loss(v, returns)
    actor_loss = -(torch.stack(log_probs) * (returns - v.detach())).sum()
    actor_optimizer.zero_grad()
    critic_optimizer.zero_grad()
    (actor_loss + critic_loss).backward()
    actor_optimizer.step()
    critic_optimizer.step()
    print(f"episode {episode}: length {len(rewards)} critic loss {critic_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
