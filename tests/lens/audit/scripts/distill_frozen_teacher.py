"""Knowledge distillation at a tiny size, after Hinton, Vinyals and Dean, "Distilling the
Knowledge in a Neural Network" (arXiv:1503.02531, 2015) and the ``loss_fn_kd`` of
haitongli/knowledge-distillation-pytorch (model/net.py, used by ``train_kd`` in train.py): a
small student is trained on ``KL(softmax(teacher / T) || softmax(student / T)) * T^2`` plus the
cross-entropy on the hard labels. The teacher, a wider network, stands for one trained before:
it is not trained here, and the optimizer holds only the student. Its logits are computed with
their graph and taken with ``.detach()`` as the soft target. The inputs are made in the script
and labelled by the teacher.
As published: nothing to fix, the teacher's cut output is a target, never a prediction.
``--out PATH`` saves the student's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=8)
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--alpha", type=float, default=0.9)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

teacher = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 4))
student = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
teacher.eval()
optimizer = torch.optim.Adam(student.parameters(), lr=1e-2)

inputs = torch.randn(128, 8)
with torch.no_grad():
    labels = teacher(inputs).argmax(1)

for it in range(args.iterations):
    soft_target = teacher(inputs).detach()
    logits = student(inputs)
    t = args.temperature
    kd = F.kl_div(F.log_softmax(logits / t, dim=1), F.softmax(soft_target / t, dim=1),
                  reduction="batchmean") * (t * t)
    loss = args.alpha * kd + (1 - args.alpha) * F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {it} loss {loss.item():.4f}")

if args.out:
    torch.save(student.state_dict(), args.out)
