"""Memory Aware Synapses (MAS), continual learning of two tiny classification tasks one after the
other with a shared feature extractor and one head per task, written after Aljundi, Babiloni,
Elhoseiny, Rohrbach and Tuytelaars, "Memory Aware Synapses: Learning what (not) to forget"
(ECCV 2018, arXiv:1711.09601): after a task is learnt, the importance Omega_ij of each parameter
is the average over the task's inputs of the magnitude of the gradient of the squared L2 norm of
the network's output, || d ||f(x)||^2 / d theta_ij ||, taken with no labels and changing no
weight; the next task is then trained on its own loss plus lambda * sum_ij Omega_ij (theta_ij -
theta*_ij)^2, theta* a frozen copy of the parameters at the end of the previous task. With the
authors' code, rahafaljundi/MAS-Memory-Aware-Synapses
(https://github.com/rahafaljundi/MAS-Memory-Aware-Synapses,
MAS_to_be_published/MAS_utils/MAS_based_Training.py: compute_importance_l2 calls
optimizer.zero_grad() for each batch, takes the summed squared output norm (MSELoss with
size_average=False against zeros) and its backward, and MAS_Omega_update.step keeps the running
average of |p.grad| over the samples seen; initialize_reg_params stores init_val =
param.data.clone(), a copy with no graph, and Weight_Regularized_SGD.step adds 2 * lambda * omega
* (p - init_val) to the gradient) and with the
re-implementation in mmasana/FACIL (src/approach/mas.py Appr: post_train_process stores
older_params = p.clone().detach() of the feature extractor and calls
estimate_parameter_importance, which runs optimizer.zero_grad() and loss.backward() per batch and
accumulates p.grad.abs(); criterion adds lamb * sum(importance * (p - older_params)^2) / 2 for
t > 0; _get_optimizer leaves the old heads out when there are no exemplars). Here, as in both,
the importance covers the shared feature extractor only, is the running sum of |grad| of the
summed squared norm of task 1's head output over batches divided by the number of samples, and
the penalty is written into the loss, lambda * sum Omega (theta - theta*)^2, so that its gradient
is the one Weight_Regularized_SGD adds. The data: Gaussian inputs made in the script, shared by
both tasks, each task labelling them by its own random linear rule, so that task 2 overwrites
task 1 unless the penalty holds the important weights.
Bug: the importance loop has no optimizer.zero_grad() before each backward, where the authors'
compute_importance_l2 and FACIL's estimate_parameter_importance clear the gradients for every
batch: the first batch's |grad| also holds the cross-entropy gradient left by task 1's last step,
and each later batch reads the running sum of the output-norm gradients of all batches so far,
so Omega is the magnitude of a cumulative, label-contaminated gradient rather than the mean
per-batch sensitivity of the output, weighting the penalty on task 2 wrongly."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--task1-steps", type=int, default=120)
parser.add_argument("--task2-steps", type=int, default=120)
parser.add_argument("--importance-batches", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--reg-lambda", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the network")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, n_classes = 8, 16, 3


def make_task(n):
    """Inputs from one shared distribution, labels by a task's own random linear rule."""
    x = torch.randn(n, dim)
    return x, (x @ torch.randn(dim, n_classes)).argmax(1)


x1_all, y1_all = make_task(512)
x2_all, y2_all = make_task(512)

features = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
head1 = nn.Linear(hidden, n_classes)
head2 = nn.Linear(hidden, n_classes)

# task 1: plain training of the feature extractor and the first head
optimizer = torch.optim.SGD(list(features.parameters()) + list(head1.parameters()), lr=0.05,
                            momentum=0.9)
for step in range(args.task1_steps):
    idx = torch.randint(0, len(x1_all), (args.batch_size,))
    loss = F.cross_entropy(head1(features(x1_all[idx])), y1_all[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 40 == 0:
        print(f"task 1 step {step} loss {loss.item():.3f}")

# after task 1: store theta* and estimate the importance, without labels and without any update
old_params = {n: p.clone().detach() for n, p in features.named_parameters()}
importance = {n: torch.zeros_like(p) for n, p in features.named_parameters()}
n_seen = 0
for b in range(args.importance_batches):
    x = x1_all[b * args.batch_size:(b + 1) * args.batch_size]
    out = head1(features(x))
    sq_norm = out.pow(2).sum()
    sq_norm.backward()
    for n, p in features.named_parameters():
        importance[n] += p.grad.abs()
    n_seen += len(x)
importance = {n: omega / n_seen for n, omega in importance.items()}

# task 2: the feature extractor and the new head, on task 2's loss plus the MAS penalty
optimizer2 = torch.optim.SGD(list(features.parameters()) + list(head2.parameters()), lr=0.05,
                             momentum=0.9)
for step in range(args.task2_steps):
    idx = torch.randint(0, len(x2_all), (args.batch_size,))
    ce = F.cross_entropy(head2(features(x2_all[idx])), y2_all[idx])
    penalty = 0.0
    for n, p in features.named_parameters():
        penalty = penalty + (importance[n] * (p - old_params[n]).pow(2)).sum()
    loss = ce + args.reg_lambda * penalty
    optimizer2.zero_grad()
    loss.backward()
    optimizer2.step()
    if step % 40 == 0:
        print(f"task 2 step {step} ce {ce.item():.3f} penalty {penalty.item():.5f}")

with torch.no_grad():
    acc1 = (head1(features(x1_all)).argmax(1) == y1_all).float().mean().item()
    acc2 = (head2(features(x2_all)).argmax(1) == y2_all).float().mean().item()
print(f"accuracy after task 2: task 1 {acc1:.3f} task 2 {acc2:.3f}")

if args.out:
    torch.save({"features": features.state_dict(), "head1": head1.state_dict(),
                "head2": head2.state_dict()}, args.out)
