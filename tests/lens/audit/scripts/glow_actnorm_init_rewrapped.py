"""A tiny normalising flow on 2-D points with Glow's activation normalisation, written after
Kingma and Dhariwal, "Glow: Generative Flow with Invertible 1x1 Convolutions" (NeurIPS 2018,
arXiv:1807.03039; openai/glow, its actnorm with data-dependent initialisation), with the affine
coupling layers of Dinh, Sohl-Dickstein and Bengio, "Density estimation using Real NVP" (ICLR
2017, arXiv:1605.08803). Each ActNorm is an affine map per feature whose bias ``loc`` and log
scale ``logs`` are set from a first batch, then trained with the rest by maximum likelihood.
The optimizer is built first, then the initialisation pass runs over one batch, then the
training loop. The bug: the initialisation sets the log scale by a new parameter,
``self.logs = nn.Parameter(...)``, where the published code writes into the existing one in
place. The optimizer built above still holds the old tensors, which no loss reaches any more,
and no optimizer steps the new ones: each ActNorm's scale stays at its initial value.
``--out PATH`` saves the flow's weights."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--init-batch", type=int, default=512)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(8) * (2 * math.pi / 8)
centres = 4.0 * torch.stack([angles.cos(), angles.sin()], dim=1) + torch.tensor([1.0, -2.0])


def sample(n):
    return centres[torch.randint(0, 8, (n,))] + 0.3 * torch.randn(n, 2)


class ActNorm(nn.Module):
    """``(x + loc) * exp(logs)``, per feature; its log-determinant is ``logs.sum()``."""

    def __init__(self, dim):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(1, dim))
        self.logs = nn.Parameter(torch.zeros(1, dim))

    def initialize(self, x):
        with torch.no_grad():
            mean, std = x.mean(dim=0, keepdim=True), x.std(dim=0, keepdim=True)
            self.loc.copy_(-mean)
            self.logs = nn.Parameter(-torch.log(std + 1e-6))

    def forward(self, x):
        return (x + self.loc) * torch.exp(self.logs), self.logs.sum().expand(x.shape[0])


class Coupling(nn.Module):
    """Real NVP's affine coupling on two features: one conditions the scale and shift of the
    other (which one alternates from layer to layer)."""

    def __init__(self, hidden, flip):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, 2))
        self.flip = flip

    def forward(self, x):
        a, b = (x[:, 1:], x[:, :1]) if self.flip else (x[:, :1], x[:, 1:])
        s, t = self.net(a).chunk(2, dim=1)
        s = torch.tanh(s)
        b = b * torch.exp(s) + t
        out = torch.cat([b, a], dim=1) if self.flip else torch.cat([a, b], dim=1)
        return out, s.sum(dim=1)


class Flow(nn.Module):
    def __init__(self, hidden=32, blocks=2):
        super().__init__()
        layers = []
        for i in range(blocks):
            layers += [ActNorm(2), Coupling(hidden, flip=i % 2 == 1)]
        self.layers = nn.ModuleList(layers)

    def initialize(self, x):
        """Glow's data-dependent initialisation: each ActNorm set from the batch as it reaches
        it, through the layers before it."""
        with torch.no_grad():
            for layer in self.layers:
                if isinstance(layer, ActNorm):
                    layer.initialize(x)
                x, _ = layer(x)

    def forward(self, x):
        logdet = torch.zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
        return x, logdet


def log_prob(flow, x):
    z, logdet = flow(x)
    return -0.5 * (z ** 2).sum(dim=1) - math.log(2 * math.pi) + logdet


flow = Flow()
optimizer = torch.optim.Adam(flow.parameters(), lr=args.lr)
flow.initialize(sample(args.init_batch))

for step in range(args.steps):
    x = sample(args.batch_size)
    nll = -log_prob(flow, x).mean()
    optimizer.zero_grad()
    nll.backward()
    optimizer.step()
    print(f"step {step} nll {nll.item():.4f}")

if args.out:
    torch.save(flow.state_dict(), args.out)
