"""Online knowledge distillation via collaborative learning, its MinLogit ensemble teacher, at a
tiny size, written after Guo, Wang, Wu, Yu, Liang, Hu and Luo, "Online Knowledge Distillation via
Collaborative Learning" (CVPR 2020, arXiv:2003.05419; Section 3, KDCL-MinLogit: the teacher's
logit of each class the least over the students of their logits minus the true class's, a fixed
soft target of every student). No code was released by the authors. Injected bug: the ensemble
teacher is made from the students' logits without the cut (``teacher =
torch.stack(shifted).min(dim=0).values``), so each student's distillation term also trains the
students that make the teacher towards it. The fix is that line, with ``.detach()``; a cut of
``soft`` where it is made or where the KL reads it is as right. Found at iteration 0. ``--out
PATH`` saves both students' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--temperature", type=float, default=2.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

students = nn.ModuleList([
    nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes)),
    nn.Sequential(nn.Linear(dim, 8), nn.ReLU(), nn.Linear(8, classes)),
])
optimizer = torch.optim.SGD(students.parameters(), lr=0.1, momentum=0.9)
T = args.temperature

for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    logits = [net(x) for net in students]
    shifted = [z - z.gather(1, y[:, None]) for z in logits]
    teacher = torch.stack(shifted).min(dim=0).values
    soft = F.softmax(teacher / T, dim=1)
    loss = 0.0
    for z in logits:
        kd = F.kl_div(F.log_softmax(z / T, dim=1), soft, reduction="batchmean") * T * T
        loss = loss + F.cross_entropy(z, y) + kd
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"students.{k}": v for k, v in students.state_dict().items()}, args.out)
