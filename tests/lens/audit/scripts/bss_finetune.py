"""Fine-tuning with Batch Spectral Shrinkage at a tiny size, written after Chen, Wang, Fu, Long
and Wang, "Catastrophic Forgetting Meets Negative Transfer: Batch Spectral Shrinkage for Safe
Transfer Learning" (NeurIPS 2019; thuml/Batch-Spectral-Shrinkage, and its port in
thuml/Transfer-Learning-Library, tllib/regularization/bss.py, ``BatchSpectralShrinkage``, the
singular values of the transposed feature batch from ``torch.svd`` and the sum of the squares
of the ``k`` smallest): a backbone, given as pretrained, and a new classifier head are trained
by the cross-entropy plus ``trade_off`` times the shrinkage term of the batch's features, which
trains the backbone (it shrinks the smallest singular values of the features). Points made in
the script (noisy class prototypes). SGD with momentum. As published: clean. ``--out PATH``
saves the backbone's and the head's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--k", type=int, default=2)
parser.add_argument("--trade-off", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat, classes = 16, 8, 4
prototypes = torch.randn(classes, dim)
labels = torch.randint(0, classes, (128,))
data = prototypes[labels] + 0.5 * torch.randn(128, dim)

backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat), nn.ReLU())
head = nn.Linear(feat, classes)
optimizer = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.05, momentum=0.9)


def bss(feature, k):
    _, s, _ = torch.linalg.svd(feature.t(), full_matrices=False)
    return s[-k:].pow(2).sum()


for step in range(args.steps):
    i = 16 * (step % 8)
    x, y = data[i:i + 16], labels[i:i + 16]
    features = backbone(x)
    logits = head(features)
    shrinkage = bss(features, args.k)
    loss = F.cross_entropy(logits, y) + args.trade_off * shrinkage
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    state = {f"backbone.{k}": v for k, v in backbone.state_dict().items()}
    state.update({f"head.{k}": v for k, v in head.state_dict().items()})
    torch.save(state, args.out)
