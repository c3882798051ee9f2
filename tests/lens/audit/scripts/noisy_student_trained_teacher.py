"""Self-training at a tiny size, written after Xie et al., "Self-training with Noisy Student
improves ImageNet classification" (arXiv:1911.04252) and google-research/noisystudent: a
teacher's soft pseudo-labels on unlabeled data, ``.detach()``-ed, as the targets of a noised
student (dropout), plus the labeled loss; both networks live in one module and SGD is built
over all of it (the teacher gets no gradient, so the optimizer leaves it as it is). Data:
Gaussian clusters made in the script. Bug: the pseudo-labels are not detached, so the
student's loss trains the teacher through its own targets and SGD steps it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)

dim, classes = 6, 3
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (64,))
labeled = centers[labels] + torch.randn(64, dim)
unlabeled = centers[torch.randint(0, classes, (256,))] + torch.randn(256, dim)


class SelfTraining(nn.Module):
    def __init__(self):
        super().__init__()
        self.teacher = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
        self.student = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Dropout(0.2),
                                     nn.Linear(16, classes))


model = SelfTraining()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for step in range(args.steps):
    i = step % 4
    x, y = labeled[16 * i:16 * i + 16], labels[16 * i:16 * i + 16]
    xu = unlabeled[64 * i:64 * i + 64]
    soft = F.softmax(model.teacher(xu), dim=1)
    unsup = -(soft * F.log_softmax(model.student(xu), dim=1)).sum(1).mean()
    loss = F.cross_entropy(model.student(x), y) + unsup
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
