"""A residual network whose layers are one block repeated across depth, at a tiny size, after
the cross-layer parameter sharing of ALBERT (Lan et al., "ALBERT: A Lite BERT for
Self-supervised Learning of Language Representations", ICLR 2020, arXiv:1909.11942;
google-research/albert, modeling.py, where every layer reuses one set of weights): an
embedding, ``depth`` applications of the same block with a residual connection, a regression
head, one optimizer over ``model.parameters()`` trained on a regression loss. The data (a
smooth function of 8 inputs) are made in the script. As published:
``nn.ModuleList([block] * depth)``, one block on purpose. ``--out PATH`` saves the weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--depth", type=int, default=4)
parser.add_argument("--iterations", type=int, default=10)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)


class TiedResidualNet(nn.Module):
    def __init__(self, depth, width=16):
        super().__init__()
        self.embed = nn.Linear(8, width)
        block = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.GELU())
        self.blocks = nn.ModuleList([block] * depth)
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h).squeeze(1)


inputs = torch.randn(256, 8)
targets = torch.sin(inputs[:, :4].sum(1)) + 0.5 * inputs[:, 4] * inputs[:, 5]

model = TiedResidualNet(args.depth)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

for it in range(args.iterations):
    idx = torch.randint(0, inputs.shape[0], (64,))
    loss = F.mse_loss(model(inputs[idx]), targets[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {it} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
