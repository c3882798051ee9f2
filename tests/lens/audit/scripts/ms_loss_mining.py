"""The multi-similarity loss with its pair mining at a tiny size, written after Wang, Han, Huang,
Dong and Scott, "Multi-Similarity Loss with General Pair Weighting for Deep Metric Learning"
(CVPR 2019, arXiv:1904.06627) and msight-tech/research-ms-loss
(ret_benchmark/losses/multi_similarity_loss.py, ``MultiSimilarityLoss.forward``): for each
anchor of a batch, a negative pair is kept if its similarity plus the margin exceeds the
anchor's hardest positive (the least similar), and a positive pair if its similarity minus the
margin is below the anchor's hardest negative (the most similar); the loss of the kept pairs is
the soft weighting of the paper, ``log(1 + sum exp(-alpha (S - lambda))) / alpha`` over the
positives plus ``log(1 + sum exp(beta (S - lambda))) / beta`` over the negatives. The hardest
pairs are found from the detached similarity matrix (``torch.min`` and ``torch.max`` along a
dimension, a value and an index each), and those values only mask the trained similarities.
Embeddings of points made in the script (noisy class prototypes, four of each class per batch).
Adam. Clean: the cut values only select the trained pairs. ``--out PATH`` saves the embedder's
weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--margin", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, emb, classes = 12, 8, 4
prototypes = torch.randn(classes, dim)
labels = torch.arange(classes).repeat(32)
data = prototypes[labels] + 0.8 * torch.randn(len(labels), dim)

embedder = nn.Sequential(nn.Linear(dim, 24), nn.ReLU(), nn.Linear(24, emb))
optimizer = torch.optim.Adam(embedder.parameters(), lr=0.01)
alpha, beta, lam = 2.0, 40.0, 0.5

for step in range(args.steps):
    i = 16 * (step % 8)
    x, y = data[i:i + 16], labels[i:i + 16]
    z = F.normalize(embedder(x), dim=1)
    sim = z @ z.t()
    same = y[:, None] == y[None, :]
    positives = same & ~torch.eye(len(y), dtype=torch.bool)
    negatives = ~same
    cut = sim.detach()
    hardest_pos, _ = torch.where(positives, cut, torch.inf).min(dim=1)
    hardest_neg, _ = torch.where(negatives, cut, -torch.inf).max(dim=1)
    keep_neg = negatives & (cut + args.margin > hardest_pos[:, None])
    keep_pos = positives & (cut - args.margin < hardest_neg[:, None])
    pos_loss = torch.log1p((torch.exp(-alpha * (sim - lam)) * keep_pos).sum(1)) / alpha
    neg_loss = torch.log1p((torch.exp(beta * (sim - lam)) * keep_neg).sum(1)) / beta
    loss = (pos_loss + neg_loss).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"embedder.{k}": v for k, v in embedder.state_dict().items()}, args.out)
