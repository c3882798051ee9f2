"""SimCLR with a RankMe monitor at a tiny size, written after Chen, Kornblith, Norouzi and
Hinton, "A Simple Framework for Contrastive Learning of Visual Representations" (ICML 2020,
arXiv:2002.05709; google-research/simclr, objective.py, ``add_contrastive_loss``), and the
rank of Garrido, Balestriero, Najman and LeCun, "RankMe: Assessing the Downstream Performance
of Pretrained Self-Supervised Representations by Their Rank" (ICML 2023, arXiv:2210.02885): the
two views of a batch pass through the encoder together, their embeddings are split back
(``torch.chunk``), and the loss is the NT-Xent cross-entropy of each view against all others,
its positive the other view. Each step also computes, from the detached embeddings of each view,
the RankMe of the view (the exponential of the entropy of its normalised singular values,
``torch.linalg.svd``), a weight-0 rank bonus made from them (``--rank-weight``, 0 by default),
and prints all three beside the loss: none of them is added to it. Vectors made in the script
(a few prototypes plus noise), views by random masking and noise. Adam. Clean: the cut values
are only printed. ``--out PATH`` saves the encoder's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--rank-weight", type=float, default=0.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat, n = 12, 8, 16
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (128,))] + 0.3 * torch.randn(128, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
optimizer = torch.optim.Adam(encoder.parameters(), lr=0.01)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


def rankme(z, eps=1e-7):
    _, s, _ = torch.linalg.svd(z, full_matrices=False)
    p = s / s.sum() + eps
    return torch.exp(-(p * p.log()).sum())


for step in range(args.steps):
    batch = data[n * (step % 8):n * (step % 8) + n]
    z = F.normalize(encoder(torch.cat([augment(batch), augment(batch)])), dim=1)
    z_a, z_b = z.chunk(2)
    logits = torch.cat([z_a, z_b]) @ torch.cat([z_a, z_b]).t() / args.temperature
    logits = logits.masked_fill(torch.eye(2 * n, dtype=torch.bool), -1e9)
    positives = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    loss = F.cross_entropy(logits, positives)
    rank_a, rank_b = (rankme(view) for view in z.detach().chunk(2))
    bonus = args.rank_weight * (rank_a + rank_b)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} rankme {rank_a:.2f} {rank_b:.2f} "
          f"bonus {bonus:.2f}")

if args.out:
    torch.save({f"encoder.{k}": v for k, v in encoder.state_dict().items()}, args.out)
