"""Differentiable architecture search (first order) at a tiny size, written after Liu, Simonyan and
Yang, "DARTS: Differentiable Architecture Search" (ICLR 2019, arXiv:1806.09055), with the search of
quark0/darts (https://github.com/quark0/darts, cnn/model_search.py MixedOp and arch_parameters,
cnn/architect.py Architect.step with ``unrolled=False``, cnn/train_search.py train): each edge mixes
a few operations by the softmax of its row of architecture weights ``alphas``, plain tensors that
require gradients and are held by their own Adam optimizer only; every iteration first steps the
alphas on a validation minibatch (clearing their gradients first: the weight step's backward also
reaches them), then steps the network's weights on a training minibatch with SGD and gradient
clipping. Two phases, as in the warm-up of PC-DARTS (Xu et al., ICLR 2020, yuhuixu1993/PC-DARTS
train_search.py, ``if epoch >= 15``): the weights alone first, then the alternating search. An MLP
supernet on vectors made in the script. Injected bug: the architecture step does not clear the
alphas' gradients, so the first architecture step reads the sum of the training gradients every
warm-up backward left on them, and each later step the sum of every validation and training gradient
so far; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=6)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--arch-learning-rate", type=float, default=3e-2)
parser.add_argument("--grad-clip", type=float, default=5.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width, classes, n_edges = 12, 24, 4, 2
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class Zero(nn.Module):
    def forward(self, x):
        return x.mul(0.0)


def operations():
    return [Zero(), nn.Identity(), nn.Sequential(nn.Linear(width, width), nn.ReLU()),
            nn.Sequential(nn.Linear(width, width), nn.Tanh())]


class MixedOp(nn.Module):
    def __init__(self):
        super().__init__()
        self._ops = nn.ModuleList(operations())

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(dim, width)
        self.edges = nn.ModuleList([MixedOp() for _ in range(n_edges)])
        self.classifier = nn.Linear(width, classes)
        self.alphas = (1e-3 * torch.randn(n_edges, len(operations()))).requires_grad_(True)

    def arch_parameters(self):
        return [self.alphas]

    def forward(self, x):
        h = F.relu(self.stem(x))
        weights = F.softmax(self.alphas, dim=-1)
        for i, edge in enumerate(self.edges):
            h = h + edge(h, weights[i])
        return self.classifier(h)


model = Network()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-4)
arch_optimizer = torch.optim.Adam(model.arch_parameters(), lr=args.arch_learning_rate,
                                  betas=(0.5, 0.999), weight_decay=1e-3)


def architect_step(input_valid, target_valid):
    loss = F.cross_entropy(model(input_valid), target_valid)
    loss.backward()
    arch_optimizer.step()


def weight_step(input_train, target_train):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(input_train), target_train)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    optimizer.step()
    return loss.item()


# phase 1: warm-up, the weights alone
for step in range(args.warmup_steps):
    loss = weight_step(*batch(args.batch_size))
    print(f"warm-up {step} train loss {loss:.4f}")

# phase 2: the search, alternating architecture and weight steps
for step in range(args.steps):
    input_train, target_train = batch(args.batch_size)
    input_valid, target_valid = batch(args.batch_size)
    architect_step(input_valid, target_valid)
    loss = weight_step(input_train, target_train)
    print(f"search {step} train loss {loss:.4f} alphas {F.softmax(model.alphas, -1)[0].tolist()}")

if args.out:
    torch.save({"weights": model.state_dict(), "alphas": model.alphas.detach()}, args.out)
