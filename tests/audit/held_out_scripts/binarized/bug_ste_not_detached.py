"""A binarized network at a tiny size, written after Hubara, Courbariaux et al., "Binarized
Neural Networks" (arXiv:1602.02830) and itayhubara/BinaryNet.pytorch
(models/binarized_modules.py ``BinarizeLinear``, main_mnist.py's clamp of the real-valued
weights to [-1, 1] after each step): the forward uses ``sign`` of the weights and of the
hidden activations, the backward passes the gradient straight through to the real-valued
weights. The repository swaps ``.data`` with a kept copy; here the straight-through estimator
is written as ``w + (sign(w) - w).detach()``. Data: Gaussian blobs made in the script.
Injected bug: in ``BinarizeLinear`` the ``.detach()`` is left out, so the weight's
gradient is ``1 - 1 = 0``: the binarized layers' weights never move."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 16, 4
centers = torch.randn(classes, dim)
labels = torch.randint(0, classes, (128,))
inputs = centers[labels] + 0.5 * torch.randn(128, dim)
batches = list(zip(inputs.split(32), labels.split(32)))


def binarize(tensor):
    return tensor + (torch.sign(tensor) - tensor).detach()


class BinarizeLinear(nn.Linear):
    def forward(self, input):
        weight = self.weight + (torch.sign(self.weight) - self.weight)
        return F.linear(input, weight, self.bias)


model = nn.Sequential(BinarizeLinear(dim, 64), nn.BatchNorm1d(64), nn.Hardtanh(),
                      BinarizeLinear(64, 64), nn.BatchNorm1d(64), nn.Hardtanh(),
                      nn.Linear(64, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)


def forward(x):
    h = model[2](model[1](model[0](x)))
    h = model[5](model[4](model[3](binarize(h))))
    return model[6](h)


for epoch in range(args.epochs):
    for x, y in batches:
        loss = F.cross_entropy(forward(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for layer in (model[0], model[3]):
                layer.weight.clamp_(-1, 1)
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
