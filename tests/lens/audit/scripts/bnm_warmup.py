"""Batch Nuclear-norm Maximization at a tiny size, written after Cui, Wang, Zhuo, Li, Huang and
Tian, "Towards Discriminability and Diversity: Batch Nuclear-norm Maximization under
Label Insufficient Situations" (CVPR 2020, arXiv:2003.12237) and cuishuhao/BNM
(BNM/train_image.py, ``train``: ``softmax_tgt = nn.Softmax(dim=1)(outputs_target)``, ``_,
s_tgt, _ = torch.svd(softmax_tgt)``, ``transfer_loss = -torch.mean(s_tgt)``, and the total
loss ``trade_off * transfer_loss + classifier_loss``): a classifier is trained by the
cross-entropy on labelled source points plus ``trade_off`` times the negative mean singular
value of its softmax predictions on an unlabelled target batch, a term that trains the
classifier on the target domain. Here the target term is switched on after a source-only
warm-up of ``--warmup`` iterations (its weight 0 before; the schedule is this script's).
Source and target points made in the script (the target a shifted and scaled copy of the
source's distribution). SGD with momentum. As published: clean. ``--out PATH`` saves the
classifier's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--trade-off", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 4
prototypes = torch.randn(classes, dim)
source_labels = torch.randint(0, classes, (128,))
source = prototypes[source_labels] + 0.5 * torch.randn(128, dim)
target = 1.3 * (prototypes[torch.randint(0, classes, (128,))] + 0.5 * torch.randn(128, dim)) + 0.4

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for step in range(args.steps):
    i = 16 * (step % 8)
    x_s, y_s, x_t = source[i:i + 16], source_labels[i:i + 16], target[i:i + 16]
    classifier_loss = F.cross_entropy(model(x_s), y_s)
    softmax_tgt = F.softmax(model(x_t), dim=1)
    _, s_tgt, _ = torch.linalg.svd(softmax_tgt, full_matrices=False)
    transfer_loss = -torch.mean(s_tgt)
    trade_off = 0.0 if step < args.warmup else args.trade_off
    loss = trade_off * transfer_loss + classifier_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} trade_off {trade_off:.1f} loss {loss.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
