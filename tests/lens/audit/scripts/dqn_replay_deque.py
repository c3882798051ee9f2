"""A deep Q-network with a replay memory kept across episodes, at a tiny size, written after the
PyTorch tutorial "Reinforcement Learning (DQN) Tutorial" (pytorch/tutorials,
intermediate_source/reinforcement_q_learning.py; Mnih et al., "Human-level control through deep
reinforcement learning", Nature 518, 2015): ``ReplayMemory`` is a ``deque`` with a maximum
length of ``Transition`` namedtuples (state, action, next state, reward), kept for the whole
run; the action is chosen epsilon-greedily under ``torch.no_grad()``; each environment step
``optimize_model`` samples a batch from the memory, gathers the policy network's Q-values of
the taken actions, takes the target network's maximum over the next states under
``torch.no_grad()``, minimises the smooth L1 loss with AdamW (``amsgrad=True``) after clipping
the gradient's values, and the target network follows by a soft update (``TAU``). The memory
holds tensors without graph (observations and rewards made by the environment, actions picked
without grad); the episode durations are kept as ints for the log. Both networks: two linear
layers with ReLU. The environment, in the script: a chain of 6 cells, start at the left end,
reward 1 at the right end, at most 8 steps. 10 episodes. ``--out PATH`` saves both
state_dicts."""

import argparse
import math
import random
from collections import deque, namedtuple

import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=10)
parser.add_argument("--cells", type=int, default=6)
parser.add_argument("--max-steps", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)
random.seed(args.seed)
EPS_START, EPS_END, EPS_DECAY = 0.9, 0.05, 40

Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque(maxlen=capacity)

    def push(self, *fields):
        self.memory.append(Transition(*fields))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(args.cells, args.hidden)
        self.layer2 = nn.Linear(args.hidden, 2)

    def forward(self, x):
        return self.layer2(F.relu(self.layer1(x)))


def observe(cell):
    return F.one_hot(torch.tensor([cell]), args.cells).float()


policy_net, target_net = DQN(), DQN()
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.AdamW(policy_net.parameters(), lr=args.lr, amsgrad=True)
memory = ReplayMemory(200)
steps_done = 0


def select_action(state):
    global steps_done
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-steps_done / EPS_DECAY)
    steps_done += 1
    if random.random() > eps_threshold:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    return torch.tensor([[random.randrange(2)]], dtype=torch.long)


def optimize_model():
    if len(memory) < args.batch_size:
        return
    batch = Transition(*zip(*memory.sample(args.batch_size)))
    non_final_mask = torch.tensor([s is not None for s in batch.next_state], dtype=torch.bool)
    non_final_next_states = [s for s in batch.next_state if s is not None]
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(args.batch_size)
    if non_final_next_states:
        with torch.no_grad():
            next_state_values[non_final_mask] = target_net(
                torch.cat(non_final_next_states)).max(1).values
    expected = next_state_values * args.gamma + reward_batch
    loss = nn.SmoothL1Loss()(state_action_values, expected.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()


episode_durations = []
for i_episode in range(args.episodes):
    cell = 0
    state = observe(cell)
    for t in range(args.max_steps):
        action = select_action(state)
        cell = max(0, cell + (1 if action.item() == 1 else -1))
        terminated = cell == args.cells - 1
        reward = torch.tensor([1.0 if terminated else 0.0])
        next_state = None if terminated else observe(cell)
        memory.push(state, action, next_state, reward)
        state = next_state
        optimize_model()
        target_sd, policy_sd = target_net.state_dict(), policy_net.state_dict()
        for key in policy_sd:
            target_sd[key] = policy_sd[key] * args.tau + target_sd[key] * (1 - args.tau)
        target_net.load_state_dict(target_sd)
        if terminated or t == args.max_steps - 1:
            episode_durations.append(t + 1)
            break
    print(f"episode {i_episode}: duration {episode_durations[-1]}, memory {len(memory)}")

if args.out:
    torch.save({"policy_net": policy_net.state_dict(), "target_net": target_net.state_dict()},
               args.out)
