"""FitNets at a tiny size, written after Romero et al., "FitNets: Hints for Thin Deep Nets"
(arXiv:1412.6550) and AberHu/Knowledge-Distillation-Zoo (train_kd.py, kd_losses/fitnet.py:
the ``Hint`` loss as MSE between the student's regressed feature and the teacher's): a wide
teacher trained on the labels; stage one trains the thin student's lower layers and a
regressor so that ``regressor(student hint) ~ teacher hint``, the teacher read under
``torch.no_grad()``; stage two trains the whole student by knowledge distillation. The
regressor exists only for stage one and is in stage one's optimizer. Data: Gaussian blobs
made in the script. Three loops, one after the other. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (128,))
inputs = centers[labels] + torch.randn(128, dim)
batches = list(zip(inputs.split(32), labels.split(32)))


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lower = nn.Sequential(nn.Linear(dim, width), nn.ReLU())
        self.upper = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, classes))

    def forward(self, x):
        hint = self.lower(x)
        return self.upper(hint), hint


teacher = Net(48)
student = Net(6)
regressor = nn.Linear(6, 48)

teacher_optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-2)
for epoch in range(args.epochs):
    for x, y in batches:
        loss = F.cross_entropy(teacher(x)[0], y)
        teacher_optimizer.zero_grad()
        loss.backward()
        teacher_optimizer.step()
    print(f"teacher epoch {epoch} loss {loss.item():.4f}")
teacher.eval()

hint_optimizer = torch.optim.SGD([*student.lower.parameters(), *regressor.parameters()],
                                 lr=0.05, momentum=0.9)
for epoch in range(args.epochs):
    for x, _ in batches:
        with torch.no_grad():
            _, teacher_hint = teacher(x)
        _, student_hint = student(x)
        loss = F.mse_loss(regressor(student_hint), teacher_hint)
        hint_optimizer.zero_grad()
        loss.backward()
        hint_optimizer.step()
    print(f"hint epoch {epoch} loss {loss.item():.4f}")

kd_optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
T = args.temperature
for epoch in range(args.epochs):
    for x, y in batches:
        with torch.no_grad():
            teacher_logits, _ = teacher(x)
        logits, _ = student(x)
        soft = F.kl_div(F.log_softmax(logits / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                        reduction="batchmean")
        loss = 0.9 * T * T * soft + 0.1 * F.cross_entropy(logits, y)
        kd_optimizer.zero_grad()
        loss.backward()
        kd_optimizer.step()
    print(f"kd epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save({"student": student.state_dict(), "regressor": regressor.state_dict(),
                "teacher": teacher.state_dict()}, args.out)
