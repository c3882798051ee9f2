"""Later-layer forgetting at a tiny size, written after Zhou, Vani, Larochelle and Courville,
"Fortuitous Forgetting in Connectionist Networks" (ICLR 2022, arXiv:2202.00155;
hlml/fortuitous_forgetting): a classifier is trained in generations, and at the end of each
generation its last layer is re-initialised while the layers below keep what they learned (the
forget-and-relearn cycle). The re-initialisation is done in place, by the layer's own
``reset_parameters()``, which writes new random values into the same weight and bias tensors:
the one optimizer, built before the first generation, holds them and keeps training them.
Correct. Data: a random two-layer teacher's labels, made in the script. ``--out PATH`` saves the
classifier's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--reset-every", type=int, default=8, help="the length of a generation")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 5
teacher = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, classes))


def batch(n):
    x = torch.randn(n, dim)
    with torch.no_grad():
        return x, teacher(x).argmax(dim=1)


class Classifier(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.body(x))


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
    if (step + 1) % args.reset_every == 0 and step + 1 < args.steps:
        model.head.reset_parameters()  # forget the last layer; relearn it in the next generation

if args.out:
    torch.save(model.state_dict(), args.out)
