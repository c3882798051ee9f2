"""On-the-fly native ensemble at a tiny size, written after Lan, Zhu and Gong, "Knowledge
Distillation by On-the-Fly Native Ensemble" (NeurIPS 2018, arXiv:1806.04606;
Lan1991Xu/ONE_NeurIPS2018, cifar_one.py with its ``KLLoss`` in loss/kl_loss.py): low-level layers
shared by several branches, each branch a classifier, and a gate that weighs the branches' logits
into an on-the-fly ensemble, the teacher. Each iteration trains every branch and the ensemble as
predictions (cross-entropy with the labels, one backward that keeps the graph), then distils the
ensemble's softened prediction into each branch through a KL helper the script defines,
``kl_loss(student_logits, teacher_logits, T)``, one backward per branch, and one SGD step.
As published: the helper makes the soft target with ``.detach()``, as the reference's KLLoss
rebuilds it from ``.data``: the ensemble is a target only in the distillation terms, and it is
trained (the gate with it) by its own cross-entropy alone.
``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--branches", type=int, default=3)
parser.add_argument("--temperature", type=float, default=3.0)
parser.add_argument("--consistency", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 4
means = 1.5 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class NativeEnsemble(nn.Module):
    """Shared low-level layers, ``branches`` high-level branches with a classifier each, and a
    gate on the shared features that weighs the branches into the ensemble's logits."""

    def __init__(self, branches):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim, 32), nn.ReLU())
        self.branches = nn.ModuleList(
            nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, classes))
            for _ in range(branches))
        self.gate = nn.Linear(32, branches)

    def forward(self, x):
        h = self.trunk(x)
        logits = torch.stack([branch(h) for branch in self.branches], dim=2)
        weights = F.softmax(self.gate(h), dim=1)
        ensemble = (logits * weights[:, None, :]).sum(dim=2)
        return logits, ensemble


def kl_loss(student_logits, teacher_logits, T):
    log_p = F.log_softmax(student_logits / T, dim=1)
    q = F.softmax(teacher_logits / T, dim=1).detach()
    return F.kl_div(log_p, q, reduction="batchmean") * T * T


model = NativeEnsemble(args.branches)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for step in range(args.steps):
    x, y = batch(args.batch_size)
    logits, teacher_logits = model(x)
    ce = sum(F.cross_entropy(logits[:, :, i], y) for i in range(args.branches))
    ce = ce + F.cross_entropy(teacher_logits, y)
    optimizer.zero_grad()
    ce.backward(retain_graph=True)
    for i in range(args.branches):
        kd = args.consistency * kl_loss(logits[:, :, i], teacher_logits, args.temperature)
        kd.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} ce {ce.item():.4f} kd {kd.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
