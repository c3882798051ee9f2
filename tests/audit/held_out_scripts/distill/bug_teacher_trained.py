"""Knowledge distillation at a tiny size, written after Hinton, Vinyals and Dean, "Distilling the
Knowledge in a Neural Network" (arXiv:1503.02531) and the loop of haitongli/
knowledge-distillation-pytorch (train.py, ``train_and_evaluate_kd``; ``loss_fn_kd`` in
model/net.py): the teacher is trained on the labels first, then the student learns from
``KLDiv(log_softmax(s / T), softmax(t / T)) * alpha * T * T + CE(s, y) * (1 - alpha)`` with the
teacher's outputs computed under ``torch.no_grad()``. Teacher and student live in one
``Distiller`` module, as the Keras distillation example holds them, and the student's
optimizer is built over that module. Data: Gaussian blobs made in the script. Two phases: the
teacher's loop, then the distillation loop. Injected bug, in the second phase only: the
teacher's forward is not under ``torch.no_grad()``, so the soft targets carry gradient and the
optimizer, built over the whole module, trains the teacher by the student's loss."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-epochs", type=int, default=6)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--alpha", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (128,))
inputs = centers[labels] + torch.randn(128, dim)
batches = list(zip(inputs.split(32), labels.split(32)))


class Distiller(nn.Module):
    def __init__(self):
        super().__init__()
        self.teacher = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, classes))
        self.student = nn.Sequential(nn.Linear(dim, 6), nn.ReLU(), nn.Linear(6, classes))

    def forward(self, x):
        teacher_logits = self.teacher(x)
        return self.student(x), teacher_logits


def loss_fn_kd(outputs, labels, teacher_outputs, alpha, T):
    soft = F.kl_div(F.log_softmax(outputs / T, dim=1), F.softmax(teacher_outputs / T, dim=1),
                    reduction="batchmean")
    return soft * (alpha * T * T) + F.cross_entropy(outputs, labels) * (1.0 - alpha)


def accuracy(net):
    with torch.no_grad():
        return (net(inputs).argmax(1) == labels).float().mean().item()


model = Distiller()

teacher_optimizer = torch.optim.Adam(model.teacher.parameters(), lr=1e-2)
model.teacher.train()
for epoch in range(args.teacher_epochs):
    for x, y in batches:
        loss = F.cross_entropy(model.teacher(x), y)
        teacher_optimizer.zero_grad()
        loss.backward()
        teacher_optimizer.step()
    print(f"teacher epoch {epoch} loss {loss.item():.4f}")

optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
model.teacher.eval()
model.student.train()
for epoch in range(args.epochs):
    for x, y in batches:
        output_batch, teacher_batch = model(x)
        loss = loss_fn_kd(output_batch, y, teacher_batch, args.alpha, args.temperature)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"student epoch {epoch} loss {loss.item():.4f}")

print(f"teacher accuracy {accuracy(model.teacher):.3f} student {accuracy(model.student):.3f}")
if args.out:
    torch.save(model.state_dict(), args.out)
