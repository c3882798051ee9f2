"""SimCLR's NT-Xent loss at a tiny size, written after Chen, Kornblith, Norouzi and Hinton, "A
Simple Framework for Contrastive Learning of Visual Representations" (ICML 2020,
arXiv:2002.05709) and google-research/simclr (objective.py, ``add_contrastive_loss``). Bug twin
of simclr_ntxent.py: the second view's projections are detached where they are made (``z_j =
projector(encoder(x_j)).detach()``). The loss still scores every projection against all the
others, but the N keys of the second view, and the queries they are, are cut: the encoder and
the projection head learn from the first view's side only, while the method trains both (the
two views are made by the same network in the same step). The fix is that line, without the
``.detach()``. ``--out PATH`` saves the encoder's and the projection head's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (96,))] + 0.3 * torch.randn(96, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
projector = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, feat))
optimizer = torch.optim.SGD([*encoder.parameters(), *projector.parameters()], lr=0.1,
                            momentum=0.9)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


def nt_xent(z_i, z_j, temperature):
    n = len(z_i)
    z = F.normalize(torch.cat([z_i, z_j]), dim=1)
    sim = z @ z.T / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


for step in range(args.steps):
    batch = data[16 * (step % 6):16 * (step % 6) + 16]
    x_i, x_j = augment(batch), augment(batch)
    z_i = projector(encoder(x_i))
    z_j = projector(encoder(x_j)).detach()
    loss = nt_xent(z_i, z_j, args.temperature)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"projector.{k}": v for k, v in projector.state_dict().items()}}, args.out)
