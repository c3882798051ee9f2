"""Mean teacher at a tiny size, written after Tarvainen and Valpola, "Mean teachers are better
role models: Weight-averaged consistency targets improve semi-supervised deep learning
results" (NeurIPS 2017, arXiv:1703.01780) and CuriousAI/mean-teacher (pytorch/main.py,
``train``, ``update_ema_variables`` and ``get_current_consistency_weight``;
pytorch/mean_teacher/losses.py, ``softmax_mse_loss``): a student trained by cross-entropy on the
labelled points and by the consistency cost, the mean squared error between its softmax and the
teacher's on another noisy copy of each point; the teacher, an exponential moving average of
the student, runs under ``torch.no_grad()`` and its logits are detached: they are only the
consistency target. The consistency weight ramps up by the sigmoid schedule. Points made in the
script. SGD with momentum. Clean: the cut output is a comparison target. ``--out PATH`` saves
the student's and the teacher's weights."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--ema-decay", type=float, default=0.95)
parser.add_argument("--consistency", type=float, default=10.0)
parser.add_argument("--rampup", type=int, default=5)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 6, 3
centers = 2.0 * torch.randn(classes, dim)
labels = torch.arange(classes).repeat(4)
labelled = centers[labels] + 0.5 * torch.randn(len(labels), dim)
unlabelled = centers[torch.randint(0, classes, (96,))] + 0.5 * torch.randn(96, dim)

student = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
teacher = copy.deepcopy(student)
for p in teacher.parameters():
    p.detach_()
optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)


def softmax_mse_loss(input_logits, target_logits):
    return F.mse_loss(F.softmax(input_logits, dim=1), F.softmax(target_logits, dim=1),
                      reduction="sum") / input_logits.numel()


def consistency_weight(step):
    phase = 1.0 - min(step, args.rampup) / args.rampup
    return args.consistency * math.exp(-5.0 * phase * phase)


for step in range(args.steps):
    x_u = unlabelled[24 * (step % 4):24 * (step % 4) + 24]
    student_input = x_u + 0.2 * torch.randn_like(x_u)
    teacher_input = x_u + 0.2 * torch.randn_like(x_u)
    class_loss = F.cross_entropy(student(labelled), labels)
    student_logits = student(student_input)
    with torch.no_grad():
        teacher_logits = teacher(teacher_input).detach()
    consistency_loss = softmax_mse_loss(student_logits, teacher_logits)
    loss = class_loss + consistency_weight(step) * consistency_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    alpha = min(1 - 1 / (step + 1), args.ema_decay)
    for p_t, p_s in zip(teacher.parameters(), student.parameters()):
        p_t.data.mul_(alpha).add_(p_s.data, alpha=1 - alpha)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"student.{k}": v for k, v in student.state_dict().items()},
                **{f"teacher.{k}": v for k, v in teacher.state_dict().items()}}, args.out)
