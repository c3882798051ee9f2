"""Deep Recurrent Q-Network (DRQN) on a tiny partially observable cue-recall task.

Paper: Matthew Hausknecht and Peter Stone, "Deep Recurrent Q-Learning for Partially Observable
MDPs", AAAI Fall Symposium on Sequential Decision Making for Intelligent Agents, 2015,
arXiv:1507.06527.
Reference implementation: keep9oing/DRQN-Pytorch-CartPole-v1, DRQN.py (class Q_net: a linear
encoder, an LSTM and a linear Q head; EpisodeMemory / EpisodeBuffer storing whole episodes;
train(), which runs the target net over the next observations, detaches its max-Q, unrolls the
online net from a zeroed recurrent state and takes one Adam step; the target copy in __main__).

The environment shows a cue (+1 or -1) only in the first observation of a six-step episode; the
middle observations carry noise only, and on the last step the agent gets +1 for the action that
matches the cue and -1 otherwise, so the Q-values of the last step depend on a memory of the
first observation. Episodes are collected with epsilon-greedy acting by the online network under
torch.no_grad(), the LSTM state carried from step to step, and stored whole. Each update samples
a batch of stored episodes, zeroes the LSTM state and unrolls the online network over the whole
sequence with an LSTMCell, so the TD error at the last step is backpropagated through time to
the cue step (the paper's bootstrapped sequential updates). The bootstrap values come from a
separate target network run under torch.no_grad() over the same observations; it is a deep copy
of the online network refreshed with load_state_dict every few updates and is never in the
optimizer. Only the online network's parameters are in Adam.
Bug: the target sync rebinds each target parameter's .data to the online parameter's tensor,
so after the first sync the target network shares storage with the online network and the
bootstrap values move with every optimizer step.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--iters", type=int, default=40)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

T = 6
OBS_DIM = 4
N_ACT = 2
HID = 32
GAMMA = 0.9
N_ENVS = 16
BATCH = 32
UPDATES_PER_ITER = 2
SYNC_EVERY = 10
BUFFER_SIZE = 400


class DRQN(nn.Module):
    def __init__(self, obs_dim, n_act, hid):
        super().__init__()
        self.enc = nn.Linear(obs_dim, hid)
        self.cell = nn.LSTMCell(hid, hid)
        self.head = nn.Linear(hid, n_act)
        self.hid = hid

    def init_state(self, batch):
        z = torch.zeros(batch, self.hid)
        return z, z.clone()

    def forward(self, obs, state=None):
        # obs: (B, L, obs_dim) -> q: (B, L, n_act)
        if state is None:
            state = self.init_state(obs.shape[0])
        h, c = state
        x = F.relu(self.enc(obs))
        qs = []
        for t in range(obs.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
            qs.append(self.head(h))
        return torch.stack(qs, 1), (h, c)


def observe(cue, t):
    n = cue.shape[0]
    o = torch.zeros(n, OBS_DIM)
    if t == 0:
        o[:, 0] = cue
        o[:, 1] = 1.0
    if t == T - 1:
        o[:, 2] = 1.0
    o[:, 3] = 0.5 * torch.randn(n)
    return o


def collect(q_net, n, eps):
    cue = torch.randint(0, 2, (n,)).float() * 2 - 1
    obs, acts, rews = [], [], []
    state = q_net.init_state(n)
    with torch.no_grad():
        for t in range(T):
            o = observe(cue, t)
            q, state = q_net(o.unsqueeze(1), state)
            greedy = q[:, 0].argmax(-1)
            rand = torch.randint(0, N_ACT, (n,))
            a = torch.where(torch.rand(n) < eps, rand, greedy)
            if t == T - 1:
                r = torch.where(a == (cue > 0).long(), 1.0, -1.0)
            else:
                r = torch.zeros(n)
            obs.append(o)
            acts.append(a)
            rews.append(r)
    return torch.stack(obs, 1), torch.stack(acts, 1), torch.stack(rews, 1)


def sync_target(target_net, q_net):
    for tp, p in zip(target_net.parameters(), q_net.parameters()):
        tp.data = p.data


q_net = DRQN(OBS_DIM, N_ACT, HID)
target_net = copy.deepcopy(q_net)
optimizer = torch.optim.Adam(q_net.parameters(), lr=3e-3)

done = torch.zeros(T)
done[-1] = 1.0
buf_obs = torch.zeros(0, T, OBS_DIM)
buf_act = torch.zeros(0, T, dtype=torch.long)
buf_rew = torch.zeros(0, T)
n_updates = 0

for it in range(args.iters):
    eps = max(0.1, 1.0 - it / 25)
    o, a, r = collect(q_net, N_ENVS, eps)
    buf_obs = torch.cat([buf_obs, o])[-BUFFER_SIZE:]
    buf_act = torch.cat([buf_act, a])[-BUFFER_SIZE:]
    buf_rew = torch.cat([buf_rew, r])[-BUFFER_SIZE:]

    for _ in range(UPDATES_PER_ITER):
        idx = torch.randint(0, buf_obs.shape[0], (BATCH,))
        obs, act, rew = buf_obs[idx], buf_act[idx], buf_rew[idx]

        with torch.no_grad():
            q_next, _ = target_net(obs)
            next_v = torch.cat([q_next[:, 1:].max(-1).values, torch.zeros(BATCH, 1)], 1)
            y = rew + GAMMA * (1.0 - done) * next_v

        q, _ = q_net(obs)
        q_a = q.gather(2, act.unsqueeze(-1)).squeeze(-1)
        loss = F.smooth_l1_loss(q_a, y)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        n_updates += 1
        if n_updates % SYNC_EVERY == 0:
            sync_target(target_net, q_net)

    if it % 10 == 0 or it == args.iters - 1:
        ret = r[:, -1].mean().item()
        print(f"iter {it:3d} eps {eps:.2f} loss {loss.item():.4f} return {ret:+.3f}")

with torch.no_grad():
    _, _, r = collect(q_net, 256, 0.0)
print(f"greedy return {r[:, -1].mean().item():+.3f}")

if args.out:
    torch.save({"q_net": q_net.state_dict(), "target_net": target_net.state_dict()}, args.out)
