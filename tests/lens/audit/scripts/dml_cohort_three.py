"""Deep mutual learning with a cohort of three students at a tiny size, written after Zhang,
Xiang, Hospedales and Lu, "Deep Mutual Learning" (CVPR 2018, arXiv:1706.00384; the K > 2 form of
Section 3.3: each student's loss is its cross-entropy plus the mean over its K - 1 peers of
KL(p_peer || p_student)) and AberHu/Knowledge-Distillation-Zoo (train_dml.py, ``train``: the
mimicry term ``criterionKD(out1, out2.detach())``, the peer's output cut, so that the term that
teaches one student does not also train its peer towards it). Three students of different
shapes, one SGD optimizer over all of them and one backward of the summed losses; the cut is in
the helper ``mimicry`` the loop calls. Points made in the script (a cluster per class). As
published: clean. ``--out PATH`` saves the three students' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

students = nn.ModuleList([
    nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes)),
    nn.Sequential(nn.Linear(dim, 24), nn.Tanh(), nn.Linear(24, classes)),
    nn.Sequential(nn.Linear(dim, classes)),
])


def mimicry(logits, peer_logits):
    """KL(p_peer || p_student): the peer's posterior is the student's fixed target."""
    target = F.softmax(peer_logits.detach(), dim=1)
    return F.kl_div(F.log_softmax(logits, dim=1), target, reduction="batchmean")


optimizer = torch.optim.SGD(students.parameters(), lr=0.1, momentum=0.9)
K = len(students)
for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    logits = [net(x) for net in students]
    loss = 0.0
    for i in range(K):
        kl = sum(mimicry(logits[i], logits[j]) for j in range(K) if j != i) / (K - 1)
        loss = loss + F.cross_entropy(logits[i], y) + kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"students.{k}": v for k, v in students.state_dict().items()}, args.out)
