"""An implicit (deep equilibrium) classifier trained by Jacobian-free backpropagation at a tiny
size, written after Fung et al., "JFB: Jacobian-Free Backpropagation for Implicit Networks"
(arXiv:2103.12803), the repository howardheaton/jacobian_free_backprop, and chapter 4 of the
NeurIPS 2020 implicit layers tutorial (implicit-layers-tutorial.org): the fixed point
``z = tanh(W z + U x)`` is found by plain iteration under ``torch.no_grad()``, then one more
application of the layer, with the graph, attaches it to the parameters. Data: Gaussian
blobs made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--max-iter", type=int, default=25)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, classes = 8, 24, 4
centers = torch.randn(classes, dim) * 1.5
labels = torch.randint(0, classes, (128,))
inputs = centers[labels] + torch.randn(128, dim)
batches = list(zip(inputs.split(32), labels.split(32)))


class ImplicitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inject = nn.Linear(dim, hidden)
        self.W = nn.Linear(hidden, hidden, bias=False)
        self.head = nn.Linear(hidden, classes)
        with torch.no_grad():
            self.W.weight.mul_(0.5)

    def layer(self, z, u):
        return torch.tanh(self.W(z) + u)

    def forward(self, x):
        u = self.inject(x)
        with torch.no_grad():
            z = torch.zeros_like(u)
            for _ in range(args.max_iter):
                z = self.layer(z, u)
        z = self.layer(z, u)
        return self.head(z)


model = ImplicitNet()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
for epoch in range(args.epochs):
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
