"""Prototypical networks at a tiny size, written after Snell, Swersky and Zemel, "Prototypical
Networks for Few-shot Learning" (NeurIPS 2017, arXiv:1703.05175) and
jakesnell/prototypical-networks (protonets/models/few_shot.py, ``Protonet.loss`` and
``euclidean_dist``). Bug twin of protonet.py: the prototypes, the means of the support
embeddings, are detached where they are made (``z_proto = z[...].view(...).mean(1).detach()``).
The softmax over the negative distances to the prototypes still pulls each query to its own
prototype and pushes it from the others, but the support side of the episode is cut: the
encoder learns from the queries only, while the method trains it through the prototypes too
(they are made by the same encoder in the same step). The fix is that line, without the
``.detach()``. ``--out PATH`` saves the encoder's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--n-way", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, n_support, n_query = 10, 12, 2, 3
centers = 1.5 * torch.randn(classes, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
optimizer = torch.optim.Adam(encoder.parameters(), lr=3e-3)


def euclidean_dist(x, y):
    return (x.unsqueeze(1) - y.unsqueeze(0)).pow(2).sum(2)


def episode(n_way):
    chosen = torch.randperm(classes)[:n_way]
    points = centers[chosen].unsqueeze(1) + 0.8 * torch.randn(n_way, n_support + n_query, dim)
    return points[:, :n_support].reshape(-1, dim), points[:, n_support:].reshape(-1, dim)


for step in range(args.steps):
    xs, xq = episode(args.n_way)
    z = encoder(torch.cat([xs, xq]))
    z_dim = z.size(-1)
    z_proto = z[:args.n_way * n_support].view(args.n_way, n_support, z_dim).mean(1).detach()
    zq = z[args.n_way * n_support:]
    log_p_y = F.log_softmax(-euclidean_dist(zq, z_proto), dim=1)
    target_inds = torch.arange(args.n_way).repeat_interleave(n_query)
    loss = F.nll_loss(log_p_y, target_inds)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"encoder.{k}": v for k, v in encoder.state_dict().items()}, args.out)
