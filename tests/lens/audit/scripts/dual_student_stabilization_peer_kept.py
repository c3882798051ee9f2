"""Dual Student's stabilization constraint at a tiny size, written after Ke, Wang, Yan, Ren and
Lau, "Dual Student: Breaking the Limits of the Teacher in Semi-supervised Learning" (ICCV 2019,
arXiv:1909.01804; Section 4) and ZHKKKe/DualStudent (dual_student.py, ``train_epoch``:
``in_r_cons_logit = Variable(r_cons_logit.detach().data, ...)``, every stabilization target
cut). Injected bug: the right student's prediction is taken as the left student's target
without the cut (``in_r = r_logit``), so where the left student is unstable (at the start,
everywhere) its stabilization term also trains the right student towards the left one. Where
the right student keeps its own prediction as target the uncut copy adds nothing (the squared
difference of a value with itself has no gradient). The fix is that line, with ``.detach()``;
a ``.detach()`` of ``in_r`` where ``tar_l`` is made, or of ``tar_l`` where the left
stabilization term reads it, is as right. One SGD optimizer per student, one backward of the
summed losses. Found at iteration 0. Points made in the script. ``--out PATH`` saves both
students' weights."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--threshold", type=float, default=0.6)
parser.add_argument("--rampup", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

l_model = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
r_model = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
l_optimizer = torch.optim.SGD(l_model.parameters(), lr=0.1, momentum=0.9)
r_optimizer = torch.optim.SGD(r_model.parameters(), lr=0.1, momentum=0.9)


def sigmoid_rampup(current, length):
    t = min(current, length) / length
    return math.exp(-5.0 * (1.0 - t) ** 2)


def mse(logits, target_logits):
    return ((F.softmax(logits, dim=1) - F.softmax(target_logits, dim=1)) ** 2).sum(1)


def noisy(x):
    return x + 0.3 * torch.randn_like(x)


for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    l_logit, le_logit = l_model(noisy(x)), l_model(noisy(x))
    r_logit, re_logit = r_model(noisy(x)), r_model(noisy(x))
    l_prob, le_prob = F.softmax(l_logit, dim=1), F.softmax(le_logit, dim=1)
    r_prob, re_prob = F.softmax(r_logit, dim=1), F.softmax(re_logit, dim=1)
    l_confident = (l_prob.amax(1) > args.threshold) | (le_prob.amax(1) > args.threshold)
    r_confident = (r_prob.amax(1) > args.threshold) | (re_prob.amax(1) > args.threshold)
    l_stable = l_confident & (l_prob.argmax(1) == le_prob.argmax(1))
    r_stable = r_confident & (r_prob.argmax(1) == re_prob.argmax(1))
    l_err = mse(l_logit, le_logit).detach()
    r_err = mse(r_logit, re_logit).detach()
    both = l_stable & r_stable
    take_r = ~l_stable | (both & (r_err < l_err))
    take_l = ~r_stable | (both & (l_err < r_err))
    in_l = l_logit.detach()
    in_r = r_logit
    tar_l = torch.where(take_r[:, None], in_r, in_l)
    tar_r = torch.where(take_l[:, None], in_l, in_r)
    weight = sigmoid_rampup(step, args.rampup)
    l_stabilization = mse(l_logit, tar_l).mean()
    r_stabilization = mse(r_logit, tar_r).mean()
    l_consistency = mse(l_logit, le_logit.detach()).mean()
    r_consistency = mse(r_logit, re_logit.detach()).mean()
    l_loss = F.cross_entropy(l_logit[:8], y[:8]) + l_consistency + weight * l_stabilization
    r_loss = F.cross_entropy(r_logit[:8], y[:8]) + r_consistency + weight * r_stabilization
    l_optimizer.zero_grad()
    r_optimizer.zero_grad()
    (l_loss + r_loss).backward()
    l_optimizer.step()
    r_optimizer.step()
    print(f"step {step} l_loss {l_loss.item():.4f} r_loss {r_loss.item():.4f}")

if args.out:
    torch.save({**{f"l_model.{k}": v for k, v in l_model.state_dict().items()},
                **{f"r_model.{k}": v for k, v in r_model.state_dict().items()}}, args.out)
