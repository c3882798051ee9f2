"""Linear classifier probes on every layer of a frozen network, at a tiny size, written after
Alain and Bengio, "Understanding intermediate layers using linear classifier probes" (ICLR 2017
workshop, arXiv:1610.01644, section 3: a linear softmax classifier is fitted on the features of
each layer of a network whose own weights are left untouched, each probe minimising its own
cross-entropy, all of them trained together). The training loop runs the frozen body under
``torch.no_grad()``, collects each probe's loss on its layer's features in a list,
backpropagates the list's sum (``retain_graph=True``), steps one SGD optimizer holding every
probe, and empties the list with ``.clear()`` after each batch's step; the list is made before
the loop. The body: three linear layers with ReLU, their weights random and frozen. The data,
in the script: 3 Gaussian classes in 8 dimensions, drawn afresh for each batch of 32. 3 epochs
of 4 batches. ``--out PATH`` saves the probes' state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batches", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--width", type=int, default=16)
parser.add_argument("--classes", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

centres = 2.0 * torch.randn(args.classes, args.dim)


def get_batch():
    y = torch.randint(0, args.classes, (args.batch_size,))
    return centres[y] + torch.randn(args.batch_size, args.dim), y


body = nn.ModuleList([nn.Linear(args.dim, args.width), nn.Linear(args.width, args.width),
                      nn.Linear(args.width, args.width)])
body.requires_grad_(False)
probes = nn.ModuleList([nn.Linear(args.dim if k == 0 else args.width, args.classes)
                        for k in range(len(body) + 1)])
optimizer = torch.optim.SGD(probes.parameters(), lr=args.lr, momentum=0.9)
probe_losses = []

for epoch in range(args.epochs):
    for _ in range(args.batches):
        x, y = get_batch()
        with torch.no_grad():
            features = [x]
            for layer in body:
                features.append(F.relu(layer(features[-1])))
        for probe, h in zip(probes, features):
            probe_losses.append(F.cross_entropy(probe(h), y))
        loss = sum(probe_losses)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
    probe_losses.clear()
    print(f"epoch {epoch}: summed probe loss {loss.item():.4f}")

if args.out:
    torch.save({"probes": probes.state_dict()}, args.out)
