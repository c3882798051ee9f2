"""Multi-task Q-learning with gradient surgery at a tiny size, written after Yu, Kumar, Gupta,
Levine, Hausman and Finn, "Gradient Surgery for Multi-Task Learning" (NeurIPS 2020,
arXiv:2001.06782; Algorithm 1, PCGrad: each task's gradient projected onto the normal plane of
every other task's gradient it conflicts with, in a random order, the projected gradients
summed), with each task's gradient computed as median-research-group/LibMTL computes it in its
autograd mode (LibMTL/weighting/abstract_weighting.py, ``_compute_grad``: one
``torch.autograd.grad`` of each task's loss, ``retain_graph=True``) and the combined gradient
written back into ``.grad`` before one optimizer step (``_reset_grad``). The tasks are two
reward functions on one small deterministic environment (states as feature vectors, three
actions), each with its own Q head on a shared trunk, trained by one-step Q-learning without a
target network: the TD target ``r + gamma * max_a Q(s', a)`` is read from the online network
and cut with ``.detach()``, a semi-gradient method (Sutton and Barto, "Reinforcement Learning:
An Introduction", 2nd ed., section 9.3 and 11.1). Transitions made in the script.
``--out PATH`` saves the trunk's and the heads' weights. Injected bug: the TD target is not cut,
so each task's loss also trains the network through its target (a residual gradient)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, dim, n_tasks, batch = 12, 3, 6, 2, 16
features = torch.randn(n_states, dim)
next_state = torch.randint(0, n_states, (n_states, n_actions))
rewards = torch.randn(n_tasks, n_states, n_actions)

trunk = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
heads = nn.ModuleList([nn.Linear(32, n_actions) for _ in range(n_tasks)])
params = [*trunk.parameters(), *heads.parameters()]
optimizer = torch.optim.Adam(params, lr=3e-3)

for step in range(args.steps):
    s = torch.randint(0, n_states, (batch,))
    a = torch.randint(0, n_actions, (batch,))
    obs, next_obs = features[s], features[next_state[s, a]]
    losses = []
    for task in range(n_tasks):
        q_sa = heads[task](trunk(obs)).gather(1, a[:, None]).squeeze(1)
        next_q = heads[task](trunk(next_obs)).max(1).values
        target = rewards[task, s, a] + args.gamma * next_q
        losses.append(F.smooth_l1_loss(q_sa, target))
    grads = []
    for loss in losses:
        g = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        grads.append(torch.cat([(torch.zeros_like(p) if gi is None else gi).flatten()
                                for p, gi in zip(params, g)]))
    projected = [g.clone() for g in grads]
    for i in range(n_tasks):
        for j in torch.randperm(n_tasks).tolist():
            dot = projected[i] @ grads[j]
            if j != i and dot < 0:
                projected[i] -= dot / grads[j].pow(2).sum() * grads[j]
    combined = torch.stack(projected).sum(0)
    start = 0
    for p in params:
        p.grad = combined[start:start + p.numel()].view_as(p)
        start += p.numel()
    optimizer.step()
    print(f"step {step} task losses {[round(v.item(), 4) for v in losses]}")

if args.out:
    torch.save({**{f"trunk.{k}": v for k, v in trunk.state_dict().items()},
                **{f"heads.{k}": v for k, v in heads.state_dict().items()}}, args.out)
