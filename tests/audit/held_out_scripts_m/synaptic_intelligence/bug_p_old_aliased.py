"""Synaptic intelligence at a tiny size, written after Zenke, Poole and Ganguli, "Continual Learning
Through Synaptic Intelligence" (ICML 2017, arXiv:1703.04200), equations (3)-(5): while task mu is
learnt each parameter k accumulates the path integral w_k = sum_t -g_k(t) * delta_k(t), its gradient
times its change at every step; at the task's end its importance is Omega_k = w_k / ((Delta_k)^2 +
xi), Delta_k its total change over the task, the weights are kept as the anchors theta~_k, and the
next task is learnt with the surrogate loss L + c * sum_k Omega_k * (theta~_k - theta_k)^2, with
ganguli-lab/pathint (https://github.com/ganguli-lab/pathint, pathint/protocols.py PATH_INT_PROTOCOL:
the step update grads2 = prev_val - unreg_grads * deltas, the task update omega = relu(grads2 /
((cweights - w) ** 2 + xi)), then cweights = w and grads2 reset; pathint/optimizers.py KOOptimizer)
and its PyTorch layout in GMvandeVen/continual-learning
(https://github.com/GMvandeVen/continual-learning, models/cl/continual_learner.py:
register_starting_param_values and prepare_importance_estimates_dicts, which keep p.detach().clone()
and p.data.clone(); update_importance_estimates, W[n].add_(-p.grad * (p.detach() - p_old[n])) after
each optimizer step and p_old[n] = p.detach().clone(); update_omega, W / (p_change ** 2 + epsilon)
with the anchor p.detach().clone(); surrogate_loss, (omega * (p - prev_values) ** 2).sum() with its
graph through p). Two phases, as in the permuted-input experiments: task 1 is a three-way
classification of random inputs, task 2 the same rule on permuted inputs, each learnt by a fresh
Adam, with c = 1 and xi = 1e-3 as in the paper's split MNIST runs. Injected bug: the parameter value
before each step is kept as p_old[n] = p.detach() without .clone() (update_importance_estimates in
GMvandeVen/continual-learning keeps p.detach().clone(), and pathint's deltas are the optimizer's own
updates), so p_old shares its storage with the parameter that Adam updates in place: from the second
step of task 1 every delta = p - p_old is zero, the path integral W holds the first step's term
alone, the importances Omega are those of one step, and task 2 is learnt under a surrogate loss that
protects the wrong weights by the wrong amounts; the error is made in the first phase, but training
changes only in the second."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps-1", type=int, default=30)
parser.add_argument("--steps-2", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--si-c", type=float, default=1.0, help="strength c of the surrogate loss")
parser.add_argument("--xi", type=float, default=1e-3, help="damping of the importances")
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 10, 32, 3
rule = torch.randn(in_dim, n_classes)
permutation = torch.randperm(in_dim)


def make_task(n, permuted):
    x = torch.randn(n, in_dim)
    y = (x @ rule).argmax(dim=1)
    return (x[:, permutation] if permuted else x), y


x1, y1 = make_task(256, permuted=False)
x2, y2 = make_task(256, permuted=True)

model = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                      nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                      nn.Linear(hidden_dim, n_classes))


def accuracy(x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


# phase 1: task 1, the path integral of -g * delta summed over the optimizer's steps
start = {n: p.detach().clone() for n, p in model.named_parameters()}
W = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
p_old = {n: p.detach().clone() for n, p in model.named_parameters()}
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps_1):
    idx = torch.randint(0, len(x1), (args.batch_size,))
    loss = F.cross_entropy(model(x1[idx]), y1[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    for n, p in model.named_parameters():
        W[n] += -p.grad * (p.detach() - p_old[n])
        p_old[n] = p.detach()
print(f"task 1 done, accuracy on 1 {accuracy(x1, y1):.3f}")

# the importances and the anchors, fixed at the end of task 1
anchors = {n: p.detach().clone() for n, p in model.named_parameters()}
omega = {n: (W[n] / ((anchors[n] - start[n]) ** 2 + args.xi)).clamp(min=0) for n in anchors}


def surrogate_loss():
    return sum((omega[n] * (p - anchors[n]) ** 2).sum() for n, p in model.named_parameters())


# phase 2: task 2 under the surrogate loss that holds the weights important to task 1
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps_2):
    idx = torch.randint(0, len(x2), (args.batch_size,))
    task_loss = F.cross_entropy(model(x2[idx]), y2[idx])
    loss = task_loss + args.si_c * surrogate_loss()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"task 2 {step} loss {task_loss.item():.4f}")
print(f"accuracy on 1 {accuracy(x1, y1):.3f}, on 2 {accuracy(x2, y2):.3f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"omega.{k}": v for k, v in omega.items()}}, args.out)
