"""Successor features with generalised policy improvement at a tiny size, written after Barreto,
Dabney, Munos, Hunt, Schaul, van Hasselt and Silver, "Successor Features for Transfer in
Reinforcement Learning" (NeurIPS 2017, arXiv:1606.05312), sections 3-5 and the SFQL algorithm:
the reward is linear in known features, r(s, a) = phi(s, a) . w; the successor features psi(s, a)
are learnt by TD towards phi(s, a) + gamma * psi(s', a') with the bootstrapped term held fixed and
a' = argmax_b max_j psi_j(s', b) . w, the GPI action over the library of the earlier tasks'
successor features; w is learnt by regression of the observed rewards on phi; Q(s, a) =
psi(s, a) . w. With mike-gimelfarb/deep-successor-features-for-transfer
(https://github.com/mike-gimelfarb/deep-successor-features-for-transfer, source/successors/
successor.py SF: add_task, update_reward (w + alpha_w * (r - phi . w) * phi), GPE and GPI;
source/successors/tabular.py TabularSF.build_successor, which starts a new task's successor
features from deepcopy(self.psi[source]); source/successors/deep.py DeepSF
.update_successor_on_batch, the next actions from GPI and the targets phis + gamma *
target_psi.predict(next_states) computed as numbers; source/agents/sfql.py SFQL.train_agent).
Two phases, one task each, on a small random MDP whose transitions are sampled uniformly (off
policy): task 1 learns psi_1 and w_1; task 2 starts psi_2 as a copy of psi_1, learns it and a
fresh w_2, and acts by GPI over psi_1 and psi_2, with psi_1 kept as it was. As published:
clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=120, help="updates of each task")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--lr-w", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, n_features = 12, 3, 4
next_state = torch.randint(0, n_states, (n_states, n_actions))
phi_table = torch.rand(n_states, n_actions, n_features)
task_w = [torch.randn(n_features), torch.randn(n_features)]


def make_psi():
    return nn.Sequential(nn.Linear(n_states, 32), nn.ReLU(),
                         nn.Linear(32, n_actions * n_features))


def successors(psi, s):
    return psi(F.one_hot(s, n_states).float()).view(len(s), n_actions, n_features)


def gpi_action(library, s, w):
    """argmax_b max_j psi_j(s, b) . w"""
    q = torch.stack([successors(psi, s) @ w for psi in library])
    return q.max(dim=0).values.argmax(dim=1)


def train_task(task, psi, w, library):
    psi_optimizer = torch.optim.Adam(psi.parameters(), lr=args.lr)
    w_optimizer = torch.optim.SGD([w], lr=args.lr_w)
    rows = torch.arange(args.batch_size)
    for step in range(args.steps):
        s = torch.randint(0, n_states, (args.batch_size,))
        a = torch.randint(0, n_actions, (args.batch_size,))
        s2, phi = next_state[s, a], phi_table[s, a]
        r = phi @ task_w[task] + 0.05 * torch.randn(args.batch_size)
        w_loss = 0.5 * ((phi @ w - r) ** 2).mean()  # the reward weights by regression
        w_optimizer.zero_grad()
        w_loss.backward()
        w_optimizer.step()
        with torch.no_grad():  # the bootstrapped target, held fixed
            a2 = gpi_action(library, s2, w)
            target = phi + args.gamma * successors(psi, s2)[rows, a2]
        td_loss = ((successors(psi, s)[rows, a] - target) ** 2).sum(dim=1).mean()
        psi_optimizer.zero_grad()
        td_loss.backward()
        psi_optimizer.step()
        if step % 40 == 0:
            print(f"task {task + 1} step {step} td {td_loss.item():.4f} "
                  f"w error {(w - task_w[task]).norm().item():.3f}")


# phase 1: the first task's successor features and reward weights
psi_1 = make_psi()
w_1 = nn.Parameter(0.01 * torch.randn(n_features))
train_task(0, psi_1, w_1, [psi_1])

# phase 2: the second task, its successor features started from the first task's
psi_2 = copy.deepcopy(psi_1)
w_2 = nn.Parameter(0.01 * torch.randn(n_features))
train_task(1, psi_2, w_2, [psi_1, psi_2])
with torch.no_grad():
    s = torch.arange(n_states)
    q_gpi = torch.stack([successors(p, s) @ w_2 for p in (psi_1, psi_2)]).max(dim=0).values
print(f"GPI values of task 2, mean {q_gpi.max(dim=1).values.mean().item():.3f}")

if args.out:
    torch.save({**{f"psi_1.{k}": v.detach().clone() for k, v in psi_1.state_dict().items()},
                **{f"psi_2.{k}": v.detach().clone() for k, v in psi_2.state_dict().items()},
                "w_1": w_1.detach().clone(), "w_2": w_2.detach().clone()}, args.out)
