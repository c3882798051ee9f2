"""Batch-hard triplet loss with a BNNeck at a tiny size, written after Hermans, Beyer and Leibe, "In
Defense of the Triplet Loss for Person Re-Identification" (arXiv:1703.07737), section 2 (batch
hard), and Luo, Gu, Liao, Lai and Jiang, "Bag of Tricks and A Strong Baseline for Deep Person
Re-identification" (CVPR Workshops 2019, arXiv:1903.07071), with the model, loss and optimizer of
michuanhaohao/reid-strong-baseline (https://github.com/michuanhaohao/reid-strong-baseline,
layers/triplet_loss.py, modeling/baseline.py and solver/build.py): minibatches of ``P`` identities
with ``K`` samples each; the triplet loss takes, for every anchor, the largest distance to a
positive and the smallest to a negative in the pairwise distance matrix of the features (the loss
trains the network through those distances), and the identity loss (cross-entropy with label
smoothing) reads the features after a batch-norm neck whose shift is frozen at zero from the start
(``bottleneck.bias.requires_grad_(False)``), the optimizer being built from the parameters that
require gradients. An MLP backbone on identities made in the script (one cluster of vectors each).
Injected bug: the distance matrix is cut from the graph before the hard examples are mined
(``dist_mat.detach()``), as if mining only picked indices, so the hardest distances it returns are
constants and the triplet loss trains nothing."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--p", type=int, default=4)
parser.add_argument("--k", type=int, default=4)
parser.add_argument("--margin", type=float, default=0.3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat_dim, identities = 16, 12, 10
centers = 1.5 * torch.randn(identities, dim)


def batch():
    ids = torch.randperm(identities)[:args.p]
    y = ids.repeat_interleave(args.k)
    return centers[y] + torch.randn(len(y), dim), y


def euclidean_dist(x, y):
    m, n = x.size(0), y.size(0)
    xx = x.pow(2).sum(1, keepdim=True).expand(m, n)
    yy = y.pow(2).sum(1, keepdim=True).expand(n, m).t()
    dist = torch.addmm(xx + yy, x, y.t(), beta=1, alpha=-2)
    return dist.clamp(min=1e-12).sqrt()


def hard_example_mining(dist_mat, labels):
    n = dist_mat.size(0)
    is_pos = labels.expand(n, n).eq(labels.expand(n, n).t())
    is_neg = labels.expand(n, n).ne(labels.expand(n, n).t())
    dist_ap, _ = torch.max(dist_mat[is_pos].contiguous().view(n, -1), 1)
    dist_an, _ = torch.min(dist_mat[is_neg].contiguous().view(n, -1), 1)
    return dist_ap, dist_an


def triplet_loss(global_feat, labels, margin):
    dist_mat = euclidean_dist(global_feat, global_feat)
    dist_ap, dist_an = hard_example_mining(dist_mat.detach(), labels)
    return F.margin_ranking_loss(dist_an, dist_ap, torch.ones_like(dist_an), margin=margin)


def cross_entropy_label_smooth(logits, targets, epsilon=0.1):
    smooth = F.one_hot(targets, logits.size(1)).float() * (1 - epsilon) + epsilon / logits.size(1)
    return (-smooth * F.log_softmax(logits, dim=1)).mean(0).sum()


class Baseline(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat_dim))
        self.bottleneck = nn.BatchNorm1d(feat_dim)
        self.bottleneck.bias.requires_grad_(False)  # no shift
        self.classifier = nn.Linear(feat_dim, identities, bias=False)

    def forward(self, x):
        global_feat = self.base(x)
        return self.classifier(self.bottleneck(global_feat)), global_feat


model = Baseline()
params = [{"params": [value], "lr": 3e-3, "weight_decay": 5e-4}
          for value in model.parameters() if value.requires_grad]
optimizer = torch.optim.Adam(params)
for step in range(args.steps):
    x, y = batch()
    cls_score, global_feat = model(x)
    id_loss = cross_entropy_label_smooth(cls_score, y)
    tri_loss = triplet_loss(global_feat, y, args.margin)
    loss = id_loss + tri_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} id {id_loss.item():.4f} triplet {tri_loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
