"""Slot attention with bi-level optimised queries at a tiny size, written after Locatello,
Weissenborn, Unterthiner, Mahendran, Heigold, Uszkoreit, Dosovitskiy and Kipf, "Object-Centric
Learning with Slot Attention" (NeurIPS 2020, arXiv:2006.15055), Algorithm 1, and Jia, Liu and Huang,
"Improving Object-centric Learning with Query Optimization" (ICLR 2023, arXiv:2210.08990), with the
module of YuLiu-LY/BO-QSA (https://github.com/YuLiu-LY/BO-QSA, models/slot_attn.py,
``truncate='bi-level'``): the slots start from learned queries and are refined by iterations of
attention, a GRU and an MLP; before the last iteration the slots are cut from the graph of the
earlier iterations and the learned queries are added back through a straight-through term
(``slots.detach() + slots_init - slots_init.detach()``), so the gradient of the last iteration
reaches the queries directly and no gradient runs back through the earlier iterations. Each slot is
decoded at every input position into a colour and a mixing logit (a broadcast decoder), and the loss
is the reconstruction error of the mixture. Sets of coloured points in clusters made in the script.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=14)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--num-iter", type=int, default=3)
parser.add_argument("--sigma", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_points, n_objects, num_slots, slot_size = 12, 3, 3, 16


def batch(n):
    centres = 2 * torch.rand(n, n_objects, 2) - 1
    colours = torch.rand(n, n_objects, 2)
    owner = torch.randint(0, n_objects, (n, n_points))
    pick = owner.unsqueeze(-1).expand(-1, -1, 2)
    pos = centres.gather(1, pick) + 0.1 * torch.randn(n, n_points, 2)
    colour = colours.gather(1, pick) + 0.02 * torch.randn(n, n_points, 2)
    return pos, colour


class SlotAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm_feature = nn.LayerNorm(slot_size)
        self.norm_slots = nn.LayerNorm(slot_size)
        self.norm_mlp = nn.LayerNorm(slot_size)
        self.project_q = nn.Linear(slot_size, slot_size, bias=False)
        self.project_k = nn.Linear(slot_size, slot_size, bias=False)
        self.project_v = nn.Linear(slot_size, slot_size, bias=False)
        self.gru = nn.GRUCell(slot_size, slot_size)
        self.mlp = nn.Sequential(nn.Linear(slot_size, 32), nn.ReLU(), nn.Linear(32, slot_size))

    def iteration(self, slots, k, v):
        b = slots.shape[0]
        q = self.project_q(self.norm_slots(slots))
        attn = F.softmax(torch.einsum("bid,bjd->bij", q, k) * slot_size**-0.5, dim=1)
        attn = attn / (attn.sum(-1, keepdim=True) + 1.0)
        updates = torch.einsum("bij,bjd->bid", attn, v)
        slots = self.gru(updates.reshape(-1, slot_size), slots.reshape(-1, slot_size))
        slots = slots.reshape(b, -1, slot_size)
        return slots + self.mlp(self.norm_mlp(slots))

    def forward(self, features, slots_init, num_iter):
        features = self.norm_feature(features)
        k, v = self.project_k(features), self.project_v(features)
        slots = slots_init
        for _ in range(num_iter - 1):
            slots = self.iteration(slots, k, v)
        slots = slots.detach() + slots_init - slots_init.detach()
        return self.iteration(slots, k, v)


class SlotAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, slot_size))
        self.slots_init = nn.Embedding(num_slots, slot_size)
        nn.init.xavier_uniform_(self.slots_init.weight)
        self.slot_attention = SlotAttention()
        self.decoder = nn.Sequential(nn.Linear(slot_size + 2, 32), nn.ReLU(), nn.Linear(32, 3))

    def forward(self, pos, colour):
        b = pos.shape[0]
        features = self.encoder(torch.cat([pos, colour], -1))
        mu = self.slots_init.weight.expand(b, -1, -1)
        slots_init = mu + torch.randn_like(mu) * args.sigma * mu.detach()
        slots = self.slot_attention(features, slots_init, args.num_iter)
        grid = torch.cat([slots.unsqueeze(2).expand(-1, -1, n_points, -1),
                          pos.unsqueeze(1).expand(-1, num_slots, -1, -1)], -1)
        decoded = self.decoder(grid)  # (batch, slots, points, colour + logit)
        masks = F.softmax(decoded[..., 2:], dim=1)
        return (masks * decoded[..., :2]).sum(1)


model = SlotAutoencoder()
optimizer = torch.optim.Adam(model.parameters(), lr=4e-3)
for step in range(args.steps):
    pos, colour = batch(args.batch_size)
    loss = F.mse_loss(model(pos, colour), colour)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} reconstruction {loss.item():.5f}")

if args.out:
    torch.save(model.state_dict(), args.out)
