"""DINO with multi-crop at a tiny size, written after Caron, Touvron, Misra, Jegou, Mairal,
Bojanowski and Joulin, "Emerging Properties in Self-Supervised Vision Transformers" (ICCV 2021,
arXiv:2104.14294) and facebookresearch/dino (main_dino.py, ``train_one_epoch`` and
``DINOLoss``): a student and a teacher of the same architecture; the teacher, an exponential
moving average of the student, sees the two global views, its outputs centred and sharpened
into targets (computed without gradient); the student sees the global views and several local
views, and the loss is the cross-entropy from each teacher target to the student's prediction
of every OTHER view, global and local, all the student's predictions trained. Global views mask
a few coordinates of a vector, local views most of them. Vectors made in the script (a few
prototypes plus noise). AdamW on the student. As published: clean. ``--out PATH`` saves the
student's and the teacher's weights and the centre."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--local-crops", type=int, default=2)
parser.add_argument("--student-temp", type=float, default=0.1)
parser.add_argument("--teacher-temp", type=float, default=0.04)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--center-momentum", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, out_dim = 12, 16
prototypes = torch.randn(5, dim)
data = prototypes[torch.randint(0, 5, (96,))] + 0.2 * torch.randn(96, dim)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 32), nn.GELU(), nn.Linear(32, 16))
        self.head = nn.Sequential(nn.GELU(), nn.Linear(16, out_dim))

    def forward(self, x):
        return self.head(self.backbone(x))


def crop(x, keep):
    return x * (torch.rand_like(x) < keep) + 0.05 * torch.randn_like(x)


student = Net()
teacher = copy.deepcopy(student)
teacher.requires_grad_(False)
center = torch.zeros(out_dim)
optimizer = torch.optim.AdamW(student.parameters(), lr=0.005, weight_decay=0.04)

for step in range(args.steps):
    x = data[16 * (step % 6):16 * (step % 6) + 16]
    global_views = [crop(x, 0.8) for _ in range(2)]
    local_views = [crop(x, 0.4) for _ in range(args.local_crops)]
    with torch.no_grad():
        teacher_raw = [teacher(v) for v in global_views]
        targets = [F.softmax((t - center) / args.teacher_temp, dim=-1) for t in teacher_raw]
    student_local = [student(v) for v in local_views]
    student_global = [student(v) for v in global_views]
    loss, terms = 0.0, 0
    for iq, q in enumerate(targets):
        for v, s in enumerate(student_global + student_local):
            if v == iq:
                continue
            loss = loss + torch.sum(-q * F.log_softmax(s / args.student_temp, dim=-1), -1).mean()
            terms += 1
    loss = loss / terms
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p_s, p_t in zip(student.parameters(), teacher.parameters()):
            p_t.mul_(args.momentum).add_((1 - args.momentum) * p_s)
        batch_center = torch.cat(teacher_raw).mean(0)
        center = center * args.center_momentum + batch_center * (1 - args.center_momentum)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"student.{k}": v for k, v in student.state_dict().items()},
                **{f"teacher.{k}": v for k, v in teacher.state_dict().items()},
                "center": center}, args.out)
