"""Semi-supervised learning as two tasks balanced by conflict-averse gradient descent, at a tiny
size, written after Liu, Liu, Jin, Stone and Liu, "Conflict-Averse Gradient Descent for
Multi-task Learning" (NeurIPS 2021, arXiv:2110.14048; Algorithm 1, CAGrad: the update
``g0 + lambda * g_w``, ``g_w`` the weighting of the task gradients that minimises
``g_w . g0 + sqrt(phi) * |g_w|`` with ``phi = c^2 |g0|^2``, rescaled by ``1 / (1 + c^2)``;
Cranial-XIX/CAGrad, ``cagrad`` and ``overwrite_grad``, which writes the combined gradient into
``.grad`` before the optimizer's step), each task's gradient from one ``torch.autograd.grad``.
The weighting is found on a grid over the two-task simplex instead of by a solver. The tasks
are a labelled cross-entropy and the consistency loss of Xie, Dai, Hovy, Luong and Le,
"Unsupervised Data Augmentation for Consistency Training" (NeurIPS 2020, arXiv:1904.12848;
google-research/uda): KL from the sharpened prediction on an unlabelled point, a fixed target
cut with ``.detach()`` (the paper's stop-gradient), to the prediction on its noised copy.
Gaussian blobs made in the script. ``--out PATH`` saves the classifier's weights. As
published: clean: the consistency target is cut where it is made."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--c", type=float, default=0.4)
parser.add_argument("--temperature", type=float, default=0.4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 6, 3
centers = 2.0 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (24,))
labelled = centers[labels] + 0.8 * torch.randn(24, dim)
unlabelled = centers[torch.randint(0, classes, (96,))] + 0.8 * torch.randn(96, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
params = list(model.parameters())
optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
grid = torch.linspace(0, 1, 101)

for step in range(args.steps):
    i = torch.randint(0, 24, (8,))
    u = unlabelled[torch.randint(0, 96, (16,))]
    supervised = F.cross_entropy(model(labelled[i]), labels[i])
    target = F.softmax(model(u) / args.temperature, dim=1).detach()
    noised = F.log_softmax(model(u + 0.3 * torch.randn_like(u)), dim=1)
    consistency = F.kl_div(noised, target, reduction="batchmean")
    grads = torch.stack([torch.cat([g.flatten() for g in torch.autograd.grad(
        loss, params, retain_graph=True)]) for loss in (supervised, consistency)])
    g0 = grads.mean(0)
    sqrt_phi = args.c * g0.norm()
    weighted = grid[:, None] * grads[0] + (1 - grid[:, None]) * grads[1]
    best = (weighted @ g0 + sqrt_phi * weighted.norm(dim=1)).argmin()
    gw = weighted[best]
    combined = (g0 + sqrt_phi / (gw.norm() + 1e-8) * gw) / (1 + args.c ** 2)
    start = 0
    for p in params:
        p.grad = combined[start:start + p.numel()].view_as(p).clone()
        start += p.numel()
    optimizer.step()
    print(f"step {step} supervised {supervised.item():.4f} consistency {consistency.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
