"""Double DQN at a tiny size, written after van Hasselt, Guez and Silver, "Deep Reinforcement
Learning with Double Q-learning" (arXiv:1509.06461) and the hard target update of Mnih et al.
2015 as the PyTorch DQN tutorial writes it (pytorch/tutorials
intermediate_source/reinforcement_q_learning.py, ``target_net.load_state_dict(
policy_net.state_dict())``): the next action chosen by the online network, valued by the
target network, under ``torch.no_grad()``; the Huber loss; the target network synchronised
every ``--target-update`` steps, the first time at step 20. The environment (a walk on five
cells, reward at the right end) lives in the script. As published: clean."""

import argparse
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=3)
parser.add_argument("--total-steps", type=int, default=50)
parser.add_argument("--target-update", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--learning-starts", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
np.random.seed(args.seed)
torch.manual_seed(args.seed)


class Chain:
    """Five cells; action 1 moves right, 0 left; reward 1 at the right end, which ends it."""

    def reset(self):
        self.pos, self.t = 0, 0
        return self.obs()

    def obs(self):
        return np.eye(5, dtype=np.float32)[self.pos]

    def step(self, action):
        self.pos = min(4, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        self.t += 1
        done = self.pos == 4 or self.t >= 12
        return self.obs(), float(self.pos == 4), done


def make_net():
    return nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 2))


env = Chain()
policy_net = make_net()
target_net = make_net()
target_net.load_state_dict(policy_net.state_dict())
optimizer = torch.optim.AdamW(policy_net.parameters(), lr=3e-3, amsgrad=True)
memory = []

state = env.reset()
for steps_done in range(1, args.total_steps + 1):
    if random.random() < max(0.1, 1 - steps_done / args.total_steps):
        action = random.randrange(2)
    else:
        with torch.no_grad():
            action = int(policy_net(torch.tensor(state)).argmax())
    next_state, reward, done = env.step(action)
    memory.append((state, action, np.float32(reward), next_state, np.float32(done)))
    state = env.reset() if done else next_state

    if len(memory) >= args.learning_starts:
        batch = random.sample(memory, min(len(memory), args.batch_size))
        s, a, r, s2, d = (torch.tensor(np.array(x)) for x in zip(*batch))
        with torch.no_grad():
            next_actions = policy_net(s2).argmax(1, keepdim=True)
            next_values = target_net(s2).gather(1, next_actions).squeeze(1)
            expected = r + args.gamma * next_values * (1 - d)
        state_action_values = policy_net(s).gather(1, a[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(state_action_values, expected)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        if steps_done % 10 == 0:
            print(f"step {steps_done} loss {loss.item():.4f}")

    if steps_done % args.target_update == 0:
        target_net.load_state_dict(policy_net.state_dict())

if args.out:
    torch.save({"policy_net": policy_net.state_dict(), "target_net": target_net.state_dict()},
               args.out)
