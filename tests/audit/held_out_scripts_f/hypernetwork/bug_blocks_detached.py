"""A static hypernetwork at a tiny size, written after Ha, Dai and Le, "HyperNetworks" (ICLR 2017,
arXiv:1609.09106), section 3.1, with the modules of g1910/HyperNetworks
(https://github.com/g1910/HyperNetworks, hypernetwork_modules.py HyperNetwork and Embedding,
primary_net.py PrimaryNetwork): one small hypernetwork turns a learned layer embedding ``z`` into a
block of weights in two linear steps; each generated layer keeps a grid of embeddings in an
nn.ParameterList, one per block, and its weight matrix is the concatenation of the blocks the
hypernetwork makes from them; the primary network's first and last layers are ordinary. The loss
trains the hypernetwork, the layer embeddings and the ordinary layers. An MLP classifier whose two
hidden layers are generated, on vectors made in the script. Injected bug: each generated block is
cut from the graph (``.detach()``), as if the generated weights were fixed kernels, so the loss
trains the first and last layers only and neither the hypernetwork nor the layer embeddings."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, classes, block, z_dim = 12, 16, 4, 8, 4
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class HyperNetwork(nn.Module):
    def __init__(self, z_dim=z_dim, in_size=block, out_size=block):
        super().__init__()
        self.z_dim, self.in_size, self.out_size = z_dim, in_size, out_size
        self.w1 = nn.Parameter(torch.fmod(torch.randn(z_dim, out_size), 2) / 4)
        self.b1 = nn.Parameter(torch.fmod(torch.randn(out_size), 2) / 4)
        self.w2 = nn.Parameter(torch.fmod(torch.randn(z_dim, in_size * z_dim), 2) / 4)
        self.b2 = nn.Parameter(torch.fmod(torch.randn(in_size * z_dim), 2) / 4)

    def forward(self, z):
        h_in = (torch.matmul(z, self.w2) + self.b2).view(self.in_size, self.z_dim)
        h_final = torch.matmul(h_in, self.w1) + self.b1  # (in_size, out_size)
        return h_final.t()  # a block of a weight matrix: (out_size, in_size)


class Embedding(nn.Module):
    def __init__(self, z_num):
        super().__init__()
        self.z_num = z_num
        self.z_list = nn.ParameterList()
        for _ in range(z_num[0] * z_num[1]):
            self.z_list.append(nn.Parameter(torch.fmod(torch.randn(z_dim), 2)))

    def forward(self, hyper_net):
        h, k = self.z_num
        rows = [torch.cat([hyper_net(self.z_list[i * k + j]).detach() for j in range(k)], dim=1)
                for i in range(h)]
        return torch.cat(rows, dim=0)


class PrimaryNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.hope = HyperNetwork()
        self.first = nn.Linear(dim, hidden)
        self.zs = nn.ModuleList([Embedding((hidden // block, hidden // block)) for _ in range(2)])
        self.last = nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.relu(self.first(x))
        for embedding in self.zs:
            h = F.relu(F.linear(h, embedding(self.hope)))
        return self.last(h)


net = PrimaryNetwork()
optimizer = torch.optim.Adam(net.parameters(), lr=5e-3)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} cross-entropy {loss.item():.4f}")

if args.out:
    torch.save({"hope": net.hope.state_dict(), "first": net.first.state_dict(),
                "last": net.last.state_dict(),
                "zs": torch.stack([torch.stack(list(e.z_list)) for e in net.zs]).detach()},
               args.out)
