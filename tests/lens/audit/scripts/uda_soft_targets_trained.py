"""Consistency training with soft targets at a tiny size, written after Xie et al.,
"Unsupervised Data Augmentation for Consistency Training" (arXiv:1904.12848) and
google-research/uda (https://github.com/google-research/uda/blob/master/image/main.py,
``_kl_divergence_with_logits`` on ``tf.stop_gradient`` of the original's logits): the
classifier's sharpened prediction on an unlabeled sample, cut (``.detach()``), is the soft
target of its prediction on a noised copy of it, plus the supervised cross-entropy. The
classifier is one ``nn.Sequential``; Gaussian clusters made in the script. The original's
logits are used as the target only. Bug: they are not cut, so the consistency loss also trains
the classifier through its own soft targets."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--temperature", type=float, default=0.4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

dim, classes = 6, 3
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (48,))
labeled = centers[labels] + torch.randn(48, dim)
unlabeled = centers[torch.randint(0, classes, (192,))] + torch.randn(192, dim)

model = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for step in range(args.steps):
    i = step % 3
    x, y = labeled[16 * i:16 * i + 16], labels[16 * i:16 * i + 16]
    xu = unlabeled[64 * i:64 * i + 64]
    ori_logits = model(xu)
    targets = F.softmax(ori_logits / args.temperature, dim=-1)
    aug_log_probs = F.log_softmax(model(xu + 0.3 * torch.randn_like(xu)), dim=-1)
    consistency = F.kl_div(aug_log_probs, targets, reduction="batchmean")
    loss = F.cross_entropy(model(x), y) + consistency
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
