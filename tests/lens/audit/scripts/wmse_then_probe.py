"""W-MSE pretraining, then a linear probe on the frozen backbone: two phases, written after
Ermolov, Siarohin, Sangineto and Sebe, "Whitening for Self-Supervised Representation Learning"
(ICML 2021, arXiv:2007.06346; htdt/self-supervised, its ``methods/w_mse.py`` and
``methods/whitening.py``) for the first, and the linear evaluation protocol of Chen et al.,
"A Simple Framework for Contrastive Learning of Visual Representations" (ICML 2020,
arXiv:2002.05709, Section B.6) for the second. Phase 1: a backbone and a projection head embed
two augmented views of each sample; each view's batch of embeddings is whitened on its own
(centred, then multiplied by the inverse of the Cholesky factor of its covariance: the
whitening is differentiable and carries gradient), and the loss is the normalized MSE between
the two whitened views, ``2 - 2 cos``. The two sides are the same network and the same
whitening on two views, pulled toward each other: both carry gradient on purpose (W-MSE has no
stop-gradient; the whitening, not a cut target, keeps it from collapsing). One sub-batch and
one whitening iteration per step (``w_size`` is the batch, ``w_iter`` is 1). Phase 2 reads the
backbone's features under ``torch.no_grad()`` and trains a linear classifier on them with an
optimizer of its own. As published: clean. Data: four Gaussian clusters in 10 dimensions, made
in the script. ``--out PATH`` saves the backbone's, the head's and the probe's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=12)
parser.add_argument("--probe-steps", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--w-eps", type=float, default=1e-3)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, rep, emb, classes = 10, 8, 4, 4
centres = 2.0 * torch.randn(classes, dim)


def batch(n):
    label = torch.randint(0, classes, (n,))
    return centres[label] + torch.randn(n, dim), label


def augment(x):
    """A view: each feature scaled at random around 1, plus Gaussian jitter."""
    return x * (1 + 0.2 * torch.randn_like(x)) + 0.2 * torch.randn_like(x)


def whiten(h):
    """The batch ``h`` centred and whitened by the inverse Cholesky factor of its covariance,
    shrunk toward the identity by ``--w-eps``."""
    centred = h - h.mean(dim=0)
    eye = torch.eye(h.shape[1])
    cov = centred.T @ centred / (h.shape[0] - 1)
    cov = (1 - args.w_eps) * cov + args.w_eps * eye
    inv_sqrt = torch.linalg.solve_triangular(torch.linalg.cholesky(cov), eye, upper=False)
    return centred @ inv_sqrt.T


def norm_mse(a, b):
    return 2 - 2 * (F.normalize(a, dim=1) * F.normalize(b, dim=1)).sum(dim=1).mean()


backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, rep), nn.ReLU())
head = nn.Sequential(nn.Linear(rep, 16), nn.ReLU(), nn.Linear(16, emb))
optimizer = torch.optim.Adam([*backbone.parameters(), *head.parameters()], lr=args.lr)
for step in range(args.pretrain_steps):
    x, _ = batch(args.batch_size)
    w_1 = whiten(head(backbone(augment(x))))
    w_2 = whiten(head(backbone(augment(x))))
    loss = norm_mse(w_1, w_2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

probe = nn.Linear(rep, classes)
probe_optimizer = torch.optim.SGD(probe.parameters(), lr=0.2, momentum=0.9)
for step in range(args.probe_steps):
    x, label = batch(args.batch_size)
    with torch.no_grad():
        features = backbone(x)
    loss = F.cross_entropy(probe(features), label)
    probe_optimizer.zero_grad()
    loss.backward()
    probe_optimizer.step()
    print(f"probe {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"backbone.{k}": v for k, v in backbone.state_dict().items()},
                **{f"head.{k}": v for k, v in head.state_dict().items()},
                **{f"probe.{k}": v for k, v in probe.state_dict().items()}}, args.out)
