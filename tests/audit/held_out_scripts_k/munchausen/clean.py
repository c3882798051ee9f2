"""Munchausen DQN at a tiny size, written after Vieillard, Pietquin and Geist, "Munchausen
Reinforcement Learning" (NeurIPS 2020, arXiv:2007.14430), section 3 (the M-DQN target: the reward
plus the scaled log-policy bonus alpha * clip(tau * ln pi(a|s), l_0, 0), plus the discounted soft
value sum_a' pi(a'|s') (q(s', a') - tau * ln pi(a'|s')), with pi the softmax of q / tau, every term
read from the target network), with google-research/google-research
(https://github.com/google-research/google-research, munchausen_rl/agents/m_dqn.py
MunchausenDQNAgent._build_target_q_op, the modified Bellman target from the target network's
q-values, which Dopamine's DQNAgent._build_train_op takes under tf.stop_gradient with its Huber
loss and periodic copy of the online weights into the target network; munchausen_rl/common/utils.py
stable_scaled_log_softmax and stable_softmax) and the PyTorch loop of vwxyzjn/cleanrl
(https://github.com/vwxyzjn/cleanrl, cleanrl/dqn.py: learning_starts, optimizer.zero_grad() before
each backward, target_network.load_state_dict every target_network_frequency steps). Two phases as
in learning_starts: a warm-up of uniformly random actions that only fills the replay buffer, then
epsilon-greedy acting with one update per environment step. A small stochastic chain (move left,
stay or move right, with a slip and a noisy reward), made in the script. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--learning-starts", type=int, default=40)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.1, help="entropy temperature")
parser.add_argument("--alpha", type=float, default=0.9, help="Munchausen scaling")
parser.add_argument("--clip-min", type=float, default=-1.0, help="l_0, lower clip of the bonus")
parser.add_argument("--epsilon", type=float, default=0.2)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--target-network-frequency", type=int, default=5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, hidden_dim, episode_len = 6, 3, 32, 12
eye = torch.eye(n_states)


def step_env(state, action):
    """Action 0 moves left, 1 stays, 2 moves right; a slip moves at random."""
    move = action - 1 if torch.rand(()) > 0.2 else int(torch.randint(-1, 2, ()))
    next_state = min(max(state + move, 0), n_states - 1)
    reward = next_state / n_states + (0.1 + next_state / n_states) * float(torch.randn(()))
    return next_state, reward, float(next_state == n_states - 1)


def scaled_log_policy(q_values):
    """tau * ln softmax(q / tau), the scaled log-policy of stable_scaled_log_softmax."""
    return args.tau * F.log_softmax(q_values / args.tau, dim=-1)


q_network = nn.Sequential(nn.Linear(n_states, hidden_dim), nn.ReLU(),
                          nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                          nn.Linear(hidden_dim, n_actions))
target_network = copy.deepcopy(q_network)
optimizer = torch.optim.Adam(q_network.parameters(), lr=args.lr)
buffer = {k: [] for k in ("obs", "act", "rew", "next_obs", "done")}

state, t = int(torch.randint(0, n_states, ())), 0
for step in range(args.learning_starts + args.steps):
    if step < args.learning_starts or torch.rand(()) < args.epsilon:
        action = int(torch.randint(0, n_actions, ()))
    else:
        with torch.no_grad():
            action = int(q_network(eye[state]).argmax())
    next_state, reward, done = step_env(state, action)
    t += 1
    for k, v in zip(buffer, (eye[state], action, reward, eye[next_state], done)):
        buffer[k].append(v)
    state = next_state
    if done or t == episode_len:
        state, t = int(torch.randint(0, n_states, ())), 0
    if step < args.learning_starts:  # phase 1: random actions fill the buffer, no update
        continue
    idx = torch.randint(0, len(buffer["obs"]), (args.batch_size,))
    obs, next_obs = torch.stack(buffer["obs"])[idx], torch.stack(buffer["next_obs"])[idx]
    actions = torch.tensor(buffer["act"])[idx].unsqueeze(1)
    rewards = torch.tensor(buffer["rew"])[idx]
    dones = torch.tensor(buffer["done"])[idx]
    with torch.no_grad():
        target_q, target_next_q = target_network(obs), target_network(next_obs)
        next_log_pi = scaled_log_policy(target_next_q)
        next_pi = F.softmax(target_next_q / args.tau, dim=-1)
        soft_value = (next_pi * (target_next_q - next_log_pi)).sum(-1)
        tau_log_pi_a = scaled_log_policy(target_q).gather(1, actions).squeeze(1)
        bonus = args.alpha * tau_log_pi_a.clamp(args.clip_min, 0.0)
        td_target = rewards + bonus + args.gamma * (1 - dones) * soft_value
    q_pred = q_network(obs).gather(1, actions).squeeze(1)
    loss = F.smooth_l1_loss(q_pred, td_target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step - args.learning_starts + 1) % args.target_network_frequency == 0:
        target_network.load_state_dict(q_network.state_dict())
    print(f"step {step} loss {loss.item():.4f} bonus {bonus.mean().item():.4f}")

if args.out:
    torch.save({"q_network": q_network.state_dict(),
                "target_network": target_network.state_dict()}, args.out)
