"""Knowledge distillation at a tiny size, written after Hinton, Vinyals and Dean, "Distilling the
Knowledge in a Neural Network" (arXiv:1503.02531) and haitongli/knowledge-distillation-pytorch
(model/net.py, ``loss_fn_kd``: ``nn.KLDivLoss()(F.log_softmax(outputs/T, dim=1),
F.softmax(teacher_outputs/T, dim=1)) * (alpha * T * T) + F.cross_entropy(outputs, labels) * (1.
- alpha)``; train.py, ``train_kd``, the teacher's outputs computed under ``torch.no_grad()``).
Two phases: a wider teacher is trained by cross-entropy (its own optimizer), then a smaller
student is trained by the distillation loss, the teacher's softened outputs only the soft
targets of the student's. Points made in the script. SGD with momentum in each phase. Clean:
the cut output is a comparison target. ``--out PATH`` saves both networks' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=6)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--alpha", type=float, default=0.9)
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

teacher = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, classes))
student = nn.Sequential(nn.Linear(dim, 8), nn.ReLU(), nn.Linear(8, classes))


def loss_fn_kd(outputs, labels, teacher_outputs):
    T = args.temperature
    soft = F.kl_div(F.log_softmax(outputs / T, dim=1), F.softmax(teacher_outputs / T, dim=1),
                    reduction="batchmean")
    return soft * (args.alpha * T * T) + F.cross_entropy(outputs, labels) * (1.0 - args.alpha)


teacher_optimizer = torch.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9)
for step in range(args.teacher_steps):
    x, y = points[16 * (step % 6):16 * (step % 6) + 16], labels[16 * (step % 6):16 * (step % 6) + 16]
    loss = F.cross_entropy(teacher(x), y)
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    print(f"teacher step {step} loss {loss.item():.4f}")

teacher.eval()
optimizer = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
for step in range(args.steps):
    x, y = points[16 * (step % 6):16 * (step % 6) + 16], labels[16 * (step % 6):16 * (step % 6) + 16]
    outputs = student(x)
    with torch.no_grad():
        teacher_outputs = teacher(x)
    loss = loss_fn_kd(outputs, y, teacher_outputs)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"student step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"teacher.{k}": v for k, v in teacher.state_dict().items()},
                **{f"student.{k}": v for k, v in student.state_dict().items()}}, args.out)
