"""MoCo v3 at a tiny size, written after Chen, Xie and He, "An Empirical Study of Training
Self-Supervised Vision Transformers" (ICCV 2021, arXiv:2104.02057) and
facebookresearch/moco-v3 (moco/builder.py, ``MoCo.forward``, ``contrastive_loss`` and
``_update_momentum_encoder``): no queue; the queries are the base encoder's projections passed
through a predictor, the keys the momentum encoder's projections of the other view, computed
under ``torch.no_grad()`` after its momentum update; each query is scored against every key of
the batch, the positive on the diagonal, the loss symmetrised over the two views and scaled by
``2 * T``. The keys are cut on purpose: they come from another network, the momentum copy the
optimizer does not hold. Vectors made in the script, views by masking and noise. SGD with
momentum. As published: clean. ``--out PATH`` saves the three networks' weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--moco-m", type=float, default=0.99)
parser.add_argument("--moco-t", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (96,))] + 0.3 * torch.randn(96, dim)

base_encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
momentum_encoder = copy.deepcopy(base_encoder)
for param_m in momentum_encoder.parameters():
    param_m.requires_grad = False
predictor = nn.Sequential(nn.Linear(feat, 16), nn.ReLU(), nn.Linear(16, feat))
optimizer = torch.optim.SGD([*base_encoder.parameters(), *predictor.parameters()], lr=0.05,
                            momentum=0.9)


def contrastive_loss(q, k, T):
    q, k = F.normalize(q, dim=1), F.normalize(k, dim=1)
    logits = torch.einsum("nc,mc->nm", q, k) / T
    return F.cross_entropy(logits, torch.arange(len(q))) * (2 * T)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    batch = data[16 * (step % 6):16 * (step % 6) + 16]
    x1, x2 = augment(batch), augment(batch)
    q1, q2 = predictor(base_encoder(x1)), predictor(base_encoder(x2))
    with torch.no_grad():
        for param_b, param_m in zip(base_encoder.parameters(), momentum_encoder.parameters()):
            param_m.data = param_m.data * args.moco_m + param_b.data * (1.0 - args.moco_m)
        k1, k2 = momentum_encoder(x1), momentum_encoder(x2)
    loss = contrastive_loss(q1, k2, args.moco_t) + contrastive_loss(q2, k1, args.moco_t)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"{name}.{k}": v for name, m in (("base_encoder", base_encoder),
                                                 ("momentum_encoder", momentum_encoder),
                                                 ("predictor", predictor))
                for k, v in m.state_dict().items()}, args.out)
