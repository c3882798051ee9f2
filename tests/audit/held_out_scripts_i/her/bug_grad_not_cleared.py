"""Hindsight experience replay on the bit-flipping task at a tiny size, written after
Andrychowicz, Wolski, Ray, Schneider, Fong, Welinder, McGrew, Tobin, Abbeel and Zaremba,
"Hindsight Experience Replay" (NeurIPS 2017, arXiv:1707.01495), section 3.1 and algorithm 1 (n
bits, one action per bit, reward -[s != g], episodes of n steps, a DQN on the state and the goal;
the "future" strategy with k = 4), with openai/baselines (https://github.com/openai/baselines,
baselines/her/her.py train: cycles of rollouts followed by n_batches updates and an update of the
target network; baselines/her/her_sampler.py make_sample_her_transitions: future_p = 1 - 1 / (1 +
replay_k), the goal replaced by an achieved state later in the same episode and the reward
recomputed) and the DQN of DLR-RM/stable-baselines3 (https://github.com/DLR-RM/stable-baselines3,
stable_baselines3/dqn/dqn.py DQN.train: the next-state values max_a Q_target(s', a) under
th.no_grad(), the Huber loss, optimizer.zero_grad() before each backward, gradients clipped;
stable_baselines3/common/envs/bit_flipping_env.py BitFlippingEnv). Two phases: the Q-network (an
MLP on the concatenated state and goal) is first pretrained on episodes of a uniformly random
policy, with hindsight goals and its target network (a deep copy) loaded from it every few
updates; then it trains online in cycles: epsilon-greedy episodes join the buffer, n_batches
updates follow, each cleared before its backward, and the target network is loaded at the end of
the cycle. The buffer, episodes and relabelling are all made in the script. Injected bug: in
the online phase the optimizer is cleared once per cycle, before the n_batches loop, instead of
before each backward (stable-baselines3's DQN.train calls optimizer.zero_grad() in every gradient
step, and baselines' DDPG.train computes fresh gradients for each of its n_batches updates), so
from the second update of each cycle Adam steps the Q-network with the clipped sum of that
cycle's DQN gradients so far; the pretraining phase clears at every update."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--n-bits", type=int, default=6)
parser.add_argument("--random-episodes", type=int, default=64)
parser.add_argument("--pretrain-updates", type=int, default=20)
parser.add_argument("--target-interval", type=int, default=5)
parser.add_argument("--cycles", type=int, default=4)
parser.add_argument("--episodes-per-cycle", type=int, default=8)
parser.add_argument("--n-batches", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--replay-k", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--epsilon", type=float, default=0.2)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_bits, hidden_dim, depth = args.n_bits, 64, 2


class QNetwork(nn.Module):
    """Q(s, g, .) over the n flip actions, from the concatenated state and goal."""

    def __init__(self):
        super().__init__()
        sizes = [2 * n_bits] + [hidden_dim] * depth
        self.hidden = nn.ModuleList([nn.Linear(i, o) for i, o in zip(sizes[:-1], sizes[1:])])
        self.out = nn.Linear(hidden_dim, n_bits)

    def forward(self, states, goals):
        x = torch.cat([states, goals], dim=-1)
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.out(x)


def run_episodes(n, epsilon):
    """n episodes of n_bits flips; returns states [n, T + 1, bits], actions [n, T], goals."""
    states = [torch.randint(0, 2, (n, n_bits)).float()]
    goals = torch.randint(0, 2, (n, n_bits)).float()
    actions = []
    for _ in range(n_bits):
        with torch.no_grad():
            greedy = q_net(states[-1], goals).argmax(-1)
        explore = torch.rand(n) < epsilon
        action = torch.where(explore, torch.randint(0, n_bits, (n,)), greedy)
        flip = F.one_hot(action, n_bits).float()
        states.append((states[-1] + flip) % 2)
        actions.append(action)
    return torch.stack(states, 1), torch.stack(actions, 1), goals


def sample_her(buffer, batch_size):
    """Transitions with the goal replaced, with probability future_p, by a later achieved state."""
    states, actions, goals = buffer
    ep = torch.randint(0, len(states), (batch_size,))
    t = torch.randint(0, n_bits, (batch_size,))
    future = t + 1 + (torch.rand(batch_size) * (n_bits - t)).long()
    relabel = torch.rand(batch_size) < 1 - 1 / (1 + args.replay_k)
    goal = torch.where(relabel.unsqueeze(1), states[ep, future], goals[ep])
    next_state = states[ep, t + 1]
    reward = -(next_state != goal).any(-1).float()
    return states[ep, t], actions[ep, t], next_state, goal, reward


def dqn_loss(batch):
    state, action, next_state, goal, reward = batch
    with torch.no_grad():
        next_q = target_net(next_state, goal).max(-1).values
        target = reward + args.gamma * next_q
    q = q_net(state, goal).gather(1, action.unsqueeze(1)).squeeze(1)
    return F.smooth_l1_loss(q, target)


q_net = QNetwork()
target_net = copy.deepcopy(q_net)
optimizer = torch.optim.Adam(q_net.parameters(), lr=args.lr)

# phase 1: pretraining on the episodes of a uniformly random policy
buffer = run_episodes(args.random_episodes, epsilon=1.0)
for update in range(args.pretrain_updates):
    loss = dqn_loss(sample_her(buffer, args.batch_size))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(q_net.parameters(), 10.0)
    optimizer.step()
    if (update + 1) % args.target_interval == 0:
        target_net.load_state_dict(q_net.state_dict())
    print(f"pretrain {update} loss {loss.item():.4f}")

# phase 2: cycles of epsilon-greedy episodes, n_batches updates, a target update
for cycle in range(args.cycles):
    episodes = run_episodes(args.episodes_per_cycle, args.epsilon)
    buffer = tuple(torch.cat([old, new]) for old, new in zip(buffer, episodes))
    success = (episodes[0][:, -1] == episodes[2]).all(-1).float().mean()
    optimizer.zero_grad()
    for batch in range(args.n_batches):
        loss = dqn_loss(sample_her(buffer, args.batch_size))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(q_net.parameters(), 10.0)
        optimizer.step()
    target_net.load_state_dict(q_net.state_dict())
    print(f"cycle {cycle} loss {loss.item():.4f} success {success.item():.3f}")

if args.out:
    torch.save({"q_net": q_net.state_dict(), "target_net": target_net.state_dict()}, args.out)
