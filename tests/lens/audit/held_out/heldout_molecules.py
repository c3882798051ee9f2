"""Molecules: a learned interatomic potential trained on forces (the negative gradient of its
energy with respect to the positions), and a pretrained molecular graph encoder fine-tuned on a
property.

The text is ours, at tiny sizes (message passing with plain torch over a small molecule's
edges); the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- atomistic-machine-learning/schnetpack src/schnetpack/task.py@dabece6f86482875cef7b8fe15dbc7
# 3f5214864f with schnetpack.atomistic.Forces: positions require grad, the model's energy is a
# sum of atomwise contributions of distance-filtered interactions, forces are
# -dE/dR by torch.autograd.grad(..., create_graph=self.training), the loss an MSE on forces
# (a force-only training step: the energy's weight in the loss is 0).
SCHNETPACK = ("atomistic-machine-learning/schnetpack src/schnetpack/task.py@"
              "dabece6f86482875cef7b8fe15dbc73f5214864f (and atomistic/response.py, Forces)")
SCHNETPACK_URL = ("https://github.com/atomistic-machine-learning/schnetpack/blob/dabece6f86482875"
                  "cef7b8fe15dbc73f5214864f/src/schnetpack/task.py")


class Potential(nn.Module):
    """Energy as a sum over atoms of an MLP of Gaussian-expanded neighbour distances."""

    def __init__(self, types: int, rbf: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(types, rbf)
        self.register_buffer("centers", torch.linspace(0.5, 2.5, rbf))
        # no bias on the last layer: a constant energy shift has no force, and the step below
        # trains on forces only
        self.atomwise = nn.Sequential(nn.Linear(rbf, 8), nn.Tanh(), nn.Linear(8, 1, bias=False))

    def forward(self, z: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        i, j = torch.triu_indices(len(z), len(z), 1)
        d = (pos[i] - pos[j]).norm(dim=-1)
        expanded = torch.exp(-4.0 * (d[:, None] - self.centers) ** 2)
        inter = torch.zeros(len(z), expanded.shape[1]).index_add(0, i, expanded * self.embedding(z[j]))
        inter = inter.index_add(0, j, expanded * self.embedding(z[i]))
        return self.atomwise(inter + self.embedding(z)).sum()


# The bug: the forces are computed without create_graph, so the force loss is a constant to
# the model: a force-only training step gives no parameter a gradient (truth "dead").
def force_field(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Potential(3, 6)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    z = torch.tensor([0, 1, 1, 2, 0])

    def step() -> torch.Tensor:
        pos = (torch.randn(5, 3, generator=gen) * 0.8).requires_grad_(True)
        ref_forces = torch.randn(5, 3, generator=gen)
        energy = model(z, pos)
        (grad,) = torch.autograd.grad(energy, pos, create_graph=not bug)
        forces = -grad
        return F.mse_loss(forces, ref_forces)

    return RealCase("force_field_no_create_graph" if bug else "force_field", SCHNETPACK,
                    SCHNETPACK_URL, "dead" if bug else "correct", step, optimizer,
                    {"model": model})


# --- snap-stanford/pretrain-gnns chem/finetune.py@6e69a06692b6870fbb381f336131314a42a0e983:
# GNN_graphpred (a pretrained GIN encoder, mean pooling, a linear head), one optimizer over
# the encoder and the head (the encoder at the learning rate times lr_scale), BCE with logits
# on the valid labels only.
PRETRAIN = ("snap-stanford/pretrain-gnns chem/finetune.py@6e69a06692b6870fbb381f336131314a42a0e983")
PRETRAIN_URL = ("https://github.com/snap-stanford/pretrain-gnns/blob/6e69a06692b6870fbb381f336131"
                "314a42a0e983/chem/finetune.py")


class GIN(nn.Module):
    def __init__(self, atom_types: int, dim: int, layers: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(atom_types, dim)
        self.mlps = nn.ModuleList(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(),
                                                nn.Linear(dim, dim)) for _ in range(layers))

    def forward(self, atoms: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        h = self.embedding(atoms)
        for mlp in self.mlps:
            h = mlp(h + torch.zeros_like(h).index_add(0, edges[1], h[edges[0]]))
        return h


# The bug: the pretrained encoder runs under torch.no_grad() (a feature extractor's habit) while
# the optimizer was built to fine-tune it: its parameters get no gradient (truth "dead").
def finetune_gnn(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    encoder = GIN(5, 6, 2)
    head = nn.Linear(6, 3)
    optimizer = torch.optim.Adam([{"params": encoder.parameters(), "lr": 1e-4},
                                  {"params": head.parameters(), "lr": 1e-3}])
    ring = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    edges = torch.cat([ring, ring.flip(0)], dim=1)
    graph = torch.tensor([0, 0, 0, 1, 1, 1])

    def step() -> torch.Tensor:
        atoms = torch.randint(0, 5, (6,), generator=gen)
        y = torch.randint(-1, 2, (2, 3), generator=gen).float()
        if bug:
            with torch.no_grad():
                h = encoder(atoms, edges)
        else:
            h = encoder(atoms, edges)
        pooled = torch.zeros(2, 6).index_add(0, graph, h) / 3
        pred = head(pooled)
        valid = y != 0
        loss = F.binary_cross_entropy_with_logits(pred, (y + 1) / 2, reduction="none")
        return torch.where(valid, loss, torch.zeros_like(loss)).sum() / valid.sum()

    return RealCase("finetune_gnn_no_grad" if bug else "finetune_gnn", PRETRAIN, PRETRAIN_URL,
                    "dead" if bug else "correct", step, optimizer,
                    {"encoder": encoder, "head": head})


CASES = {"force_field": force_field,
         "force_field_no_create_graph": lambda seed: force_field(seed, bug=True),
         "finetune_gnn": finetune_gnn,
         "finetune_gnn_no_grad": lambda seed: finetune_gnn(seed, bug=True)}
TWINS = {"force_field_no_create_graph": "force_field", "finetune_gnn_no_grad": "finetune_gnn"}
FIELD = "molecules (learned potentials, molecular graphs)"
