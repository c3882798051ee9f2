"""A structure refiner with recycling at a tiny size, written after the recycling of AlphaFold 2
(Jumper et al., "Highly accurate protein structure prediction with AlphaFold", Nature 596, 2021;
Supplementary Information 1.10) as deepmind/alphafold trains it (``AlphaFold.__call__`` in
https://github.com/deepmind/alphafold/blob/main/alphafold/model/modules.py: ``get_prev`` passes
the recycled outputs through ``jax.lax.stop_gradient``) and OpenFold (``AlphaFold.forward`` in
https://github.com/aqlaboratory/openfold/blob/main/openfold/model/model.py: the cycles before the
last run with gradients off). Each iteration samples a number of recycles; the network is run
that many times on the same features, each run reading the coordinates it predicted last (zeros
before the first), without gradients, and the loss reads only the last run. Here a chain of 8
points in the plane is predicted from its noisy pairwise distances by an MLP that also embeds
the distances of the recycled coordinates (AlphaFold's recycling embedder of ``prev_pos``); a
loss on distances (invariant to rotation, as AlphaFold's distogram loss is). Data made in the
script. Injected bug: the recycling runs keep their gradients (no ``torch.no_grad()``), so
the loss also trains the model through every earlier run; it begins at the first iteration that
recycles."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=12)
parser.add_argument("--max-recycles", type=int, default=2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

RESIDUES, BATCH = 8, 16


def distances(coords):
    return (coords[:, :, None] - coords[:, None]).pow(2).sum(-1).flatten(1)


def chains(n):
    steps = torch.randn(n, RESIDUES, 2)
    return (steps / steps.norm(dim=-1, keepdim=True)).cumsum(1)


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(RESIDUES * RESIDUES, 64)
        self.recycle = nn.Linear(RESIDUES * RESIDUES, 64)
        self.trunk = nn.Sequential(nn.SiLU(), nn.Linear(64, 64), nn.SiLU(),
                                   nn.Linear(64, RESIDUES * 2))

    def forward(self, features, prev_coords):
        h = self.embed(features) + self.recycle(distances(prev_coords))
        return self.trunk(h).view(-1, RESIDUES, 2)


model = Refiner()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for iteration in range(args.iterations):
    true_coords = chains(BATCH)
    features = distances(true_coords) + 0.1 * torch.randn(BATCH, RESIDUES * RESIDUES)
    num_recycles = int(torch.randint(0, args.max_recycles + 1, ()))
    prev_coords = torch.zeros(BATCH, RESIDUES, 2)
    for _ in range(num_recycles):
        prev_coords = model(features, prev_coords)
    coords = model(features, prev_coords)
    loss = F.mse_loss(distances(coords), distances(true_coords))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {iteration} recycles {num_recycles} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
