"""Group DRO, online group distributionally robust optimisation of a tiny classifier on a
synthetic task with a spurious attribute and four groups, written after Sagawa, Koh, Hashimoto
and Liang, "Distributionally Robust Neural Networks for Group Shifts: On the Importance of
Regularization for Worst-Case Generalization" (ICLR 2020, arXiv:1911.08731): the model minimises
the worst-group expected loss through its online form (Algorithm 1), in which a distribution q
over the groups is kept across steps and moved by exponentiated gradient ascent on the per-group
losses of each minibatch, q_g <- q_g * exp(eta_q * loss_g) then renormalised, a step of the
adversary that treats the losses as fixed numbers, while the model takes a gradient step on the
q-weighted loss sum_g q_g * loss_g with q held fixed. With the authors' code, kohpangwei/group_DRO
(https://github.com/kohpangwei/group_DRO, loss.py LossComputer: loss takes the per-sample
losses of criterion (CrossEntropyLoss with reduction='none'), compute_group_avg averages them per
group with a one-hot group map and a denominator kept away from zero, and compute_robust_loss
sets self.adv_probs = self.adv_probs * torch.exp(self.step_size * adjusted_loss.data), divides it
by its sum and returns group_loss @ self.adv_probs; train.py run_epoch calls
optimizer.zero_grad(), loss_main.backward() and optimizer.step() for every batch, and train
builds torch.optim.SGD over the parameters that require grad with momentum 0.9 and weight
decay). Here the exponentiated step reads the losses through .detach(), as .data does there,
the updated q is kept detached for the next batch, no generalisation adjustment is added
(adj = 0) and the loss is not normalised; the robust step size is 0.1, ten times the code's
default, so that q moves within the hundred-odd steps of this run. The data: two labels y and a
spurious attribute a, group 2 * y + a, the attribute agreeing with the label in 90% of the
examples and carried by a clean feature, the label by a noisier one, so that ERM leans on the
attribute and does worst on the two minority groups.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--weight-decay", type=float, default=1e-3)
parser.add_argument("--robust-step-size", type=float, default=0.1, help="eta_q")
parser.add_argument("--out", default=None, help="where to save the model and q")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_train, dim, hidden, n_groups = 1024, 10, 32, 4


def make_data(n):
    y = torch.randint(0, 2, (n,))
    agree = torch.rand(n) < 0.9
    a = torch.where(agree, y, 1 - y)
    x = torch.randn(n, dim)
    x[:, 0] += 1.0 * (2 * y - 1)
    x[:, 1] += 2.0 * (2 * a - 1)
    return x, y, 2 * y + a


x_train, y_train, g_train = make_data(n_train)
x_test, y_test, g_test = make_data(2048)

model = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                      nn.Linear(hidden, 2))
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=args.lr,
                            momentum=0.9, weight_decay=args.weight_decay)
adv_probs = torch.ones(n_groups) / n_groups


def group_average(values, groups):
    group_map = (groups == torch.arange(n_groups).unsqueeze(1)).float()
    group_count = group_map.sum(1)
    return group_map @ values / (group_count + (group_count == 0).float())


step = 0
for epoch in range(args.epochs):
    perm = torch.randperm(n_train)
    for start in range(0, n_train, args.batch_size):
        idx = perm[start:start + args.batch_size]
        logits = model(x_train[idx])
        per_sample_loss = F.cross_entropy(logits, y_train[idx], reduction="none")
        group_loss = group_average(per_sample_loss, g_train[idx])
        q = adv_probs * torch.exp(args.robust_step_size * group_loss.detach())
        q = q / q.sum()
        robust_loss = group_loss @ q
        optimizer.zero_grad()
        robust_loss.backward()
        optimizer.step()
        adv_probs = q.detach()
        if step % 40 == 0:
            print(f"epoch {epoch} step {step} robust loss {robust_loss.item():.4f}"
                  f" q {[round(v, 3) for v in adv_probs.tolist()]}")
        step += 1

with torch.no_grad():
    correct = (model(x_test).argmax(1) == y_test).float()
    group_acc = group_average(correct, g_test)
print(f"test accuracy {correct.mean().item():.3f} worst group {group_acc.min().item():.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "adv_probs": adv_probs}, args.out)
