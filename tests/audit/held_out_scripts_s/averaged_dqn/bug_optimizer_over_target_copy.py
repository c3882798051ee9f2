"""Averaged-DQN on a tiny synthetic MDP, written after Anschel, Baram and Shimkin, "Averaged-DQN:
Variance Reduction and Stabilization for Deep Reinforcement Learning" (ICML 2017,
arXiv:1611.01929): DQN with a replay buffer whose TD target is built from the average of the K
previously learned Q-networks, y = r + gamma * max_a' (1/K) sum_k Q(s', a'; theta_{i-k}), and not
from a single target network; every few updates the oldest of the K snapshots is dropped and a
frozen copy of the current network takes its place (Algorithm 1 of the paper). With the public
implementation qlan3/Explorer (https://github.com/qlan3/Explorer, agents/AveragedDQN.py
AveragedDQN: __init__ builds K target networks Q_net_target, each loaded with
Q_net[0].state_dict(); learn runs VanillaDQN.learn (agents/VanillaDQN.py: a replay sample,
compute_q_target, comput_q by gather, optimizer.zero_grad(), loss.backward(), optimizer.step())
and then, every target_network_update_freqency updates, loads the online network's state_dict
into Q_net_target[update_target_net_index] and moves the index round robin, so the slot
overwritten is always the oldest snapshot; compute_q_target sums the K targets' detached
outputs, takes the max over actions divided by K and returns rewards + discount * q_next *
(1 - dones)); StepNeverStop/RLs (rls/algorithms/single/averaged_dqn.py AveragedDQN._train and
_after_train) does the same with sync_params and a .detach() on the whole n-step target. Here
the K snapshots are kept oldest first in a list, the oldest popped and a copy.deepcopy of the
online network appended, which is the same round-robin replacement; the targets are computed
under torch.no_grad(). Two phases: a warm-up that fills the replay buffer with uniformly random
actions, then the main loop of epsilon-greedy acting and one Averaged-DQN update per step. The
MDP (8 states with random feature vectors, 3 actions, a random deterministic transition table,
random rewards and a rewarding terminal goal) is made in the script.
Bug: the optimizer is built over target_net, the loop variable left over from making the K target
copies, torch.optim.Adam(target_net.parameters(), ...), where the online network's parameters
are meant (Adam(q_net.parameters()); Explorer's VanillaDQN.__init__ builds the optimizer over
Q_net[0].parameters() and RLs's AveragedDQN wraps q_net in its OPLR), so the TD loss fills
q_net's gradients at every backward, which no optimizer steps or clears, while the optimizer
holds the last initial target copy, whose outputs are computed under torch.no_grad() and which
never gets a gradient: the online network stays at its initialisation, every snapshot copies
that untrained network, and nothing is learned."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=100)
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--k", type=int, default=4, help="number of averaged target networks")
parser.add_argument("--sync-every", type=int, default=20, help="updates between snapshots")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--epsilon", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the online and target networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

# the MDP: feature vectors of the states, a deterministic transition table, rewards in [0, 0.5]
# and a goal state that ends the episode with reward 1; episodes are also cut after `horizon`
n_states, n_actions, obs_dim, horizon = 8, 3, 6, 15
goal = n_states - 1
features = torch.randn(n_states, obs_dim)
next_state_table = torch.randint(0, n_states, (n_states, n_actions))
next_state_table[goal - 1, 0] = goal
reward_table = 0.5 * torch.rand(n_states, n_actions)


def env_step(state, action):
    nxt = int(next_state_table[state, action])
    reward = 1.0 if nxt == goal else float(reward_table[state, action])
    return nxt, reward, nxt == goal


capacity = args.warmup_steps + args.steps
buf_state = torch.zeros(capacity, dtype=torch.long)
buf_action = torch.zeros(capacity, dtype=torch.long)
buf_reward = torch.zeros(capacity)
buf_next = torch.zeros(capacity, dtype=torch.long)
buf_done = torch.zeros(capacity)
size = 0


def push(state, action, reward, nxt, done):
    global size
    buf_state[size], buf_action[size], buf_reward[size] = state, action, reward
    buf_next[size], buf_done[size] = nxt, float(done)
    size += 1


q_net = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                      nn.Linear(32, n_actions))
target_nets = []
for _ in range(args.k):
    target_net = copy.deepcopy(q_net)
    target_nets.append(target_net)
optimizer = torch.optim.Adam(target_net.parameters(), lr=args.lr)

# phase 1: warm-up, the replay buffer is filled with uniformly random actions
state, t = int(torch.randint(0, goal, ())), 0
for _ in range(args.warmup_steps):
    action = int(torch.randint(0, n_actions, ()))
    nxt, reward, done = env_step(state, action)
    push(state, action, reward, nxt, done)
    state, t = nxt, t + 1
    if done or t == horizon:
        state, t = int(torch.randint(0, goal, ())), 0

# phase 2: epsilon-greedy acting and one Averaged-DQN update per environment step
for step in range(args.steps):
    with torch.no_grad():
        greedy = int(q_net(features[state]).argmax())
    explore = bool(torch.rand(()) < args.epsilon)
    random_action = int(torch.randint(0, n_actions, ()))
    action = random_action if explore else greedy
    nxt, reward, done = env_step(state, action)
    push(state, action, reward, nxt, done)
    state, t = nxt, t + 1
    if done or t == horizon:
        state, t = int(torch.randint(0, goal, ())), 0

    idx = torch.randint(0, size, (args.batch_size,))
    s, a, r = buf_state[idx], buf_action[idx], buf_reward[idx]
    s2, d = buf_next[idx], buf_done[idx]
    with torch.no_grad():
        q_next = torch.stack([net(features[s2]) for net in target_nets]).mean(0)
        target = r + args.gamma * (1 - d) * q_next.max(1).values
    q_sa = q_net(features[s]).gather(1, a.unsqueeze(1)).squeeze(1)
    loss = F.mse_loss(q_sa, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

    if (step + 1) % args.sync_every == 0:
        target_nets.pop(0)
        target_nets.append(copy.deepcopy(q_net))
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} mean target {target.mean().item():.3f}")

if args.out:
    torch.save({"q_net": q_net.state_dict(),
                "target_nets": nn.ModuleList(target_nets).state_dict()}, args.out)
