"""Deep mutual learning at a tiny size, written after Zhang, Xiang, Hospedales and Lu, "Deep
Mutual Learning" (arXiv:1706.00384): a cohort of two students trained together, each on the
cross-entropy of the labels plus ``D_KL(p_j || p_i)`` towards its peer's predicted distribution,
the peer's prediction serving as a fixed target for the student it teaches. Written with one
optimizer over the cohort and the summed losses (the students' updates in one step). Two phases:
the students first train alone on the labels, then mutually. Two small MLP students of different
widths on vectors made in the script, with a fifth of the labels flipped. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=8)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 5
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    x = means[y] + torch.randn(n, dim)
    flip = torch.rand(n) < 0.2
    return x, torch.where(flip, torch.randint(0, classes, (n,)), y)


def student(width):
    return nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, classes))


students = nn.ModuleList([student(32), student(16)])
optimizer = torch.optim.SGD(students.parameters(), lr=0.1, momentum=0.9)
students.train()

# phase 1: each student alone on the labels
for step in range(args.warmup_steps):
    x, y = batch(args.batch_size)
    loss = sum(F.cross_entropy(net(x), y) for net in students)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.4f}")

# phase 2: mutual learning, each student also matching its peer's predictions
for step in range(args.steps):
    x, y = batch(args.batch_size)
    outputs = [net(x) for net in students]
    loss = 0.0
    for i, out in enumerate(outputs):
        peer = outputs[1 - i]
        kl = F.kl_div(F.log_softmax(out, dim=1), F.softmax(peer.detach(), dim=1),
                      reduction="batchmean")
        loss = loss + F.cross_entropy(out, y) + kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"student{i}": net.state_dict() for i, net in enumerate(students)}, args.out)
