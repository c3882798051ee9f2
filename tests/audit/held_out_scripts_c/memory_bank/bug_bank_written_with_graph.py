"""Instance discrimination with a memory bank at a tiny size, written after Wu, Xiong, Yu and
Lin, "Unsupervised Feature Learning via Non-Parametric Instance Discrimination"
(arXiv:1805.01978): every training instance is its own class; an embedding ``v = f(x) / ||f(x)||``
is scored against the memory bank's stored embeddings of all instances with the
non-parametric softmax ``exp(v_j . v / tau) / sum_k exp(v_k . v / tau)``; after each step the
bank's entries of the minibatch are moved towards the new embeddings with the proximal momentum
``v_i <- normalise(m v_i + (1 - m) f(x_i))``, outside the gradient computation. A linear
embedding of augmented (noise, feature dropout) vectors made in the script. Injected bug: the
bank is written with the embeddings' graph (``bank.update(v, index)`` for ``v.detach()``), so the
memory holds every earlier minibatch's graph; ``backward(retain_graph=True)`` lets the run go on,
and the non-parametric softmax then trains the embedding through the stored entries too."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--low-dim", type=int, default=8)
parser.add_argument("--nce-t", type=float, default=0.1)
parser.add_argument("--nce-m", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, dim = 64, 20
data = torch.randn(8, dim)[torch.randint(0, 8, (n,))] + 0.5 * torch.randn(n, dim)


def augment(x):
    return F.dropout(x + 0.1 * torch.randn_like(x), p=0.1)


class MemoryBank(nn.Module):
    def __init__(self, size, low_dim, momentum):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("memory", F.normalize(torch.randn(size, low_dim), dim=1))

    def forward(self, v, index, t):
        logits = v @ self.memory.t() / t
        return F.cross_entropy(logits, index)

    def update(self, v, index):
        mixed = self.momentum * self.memory[index] + (1 - self.momentum) * v
        self.memory = self.memory.index_copy(0, index, F.normalize(mixed, dim=1))


embed = nn.Linear(dim, args.low_dim)
bank = MemoryBank(n, args.low_dim, args.nce_m)
optimizer = torch.optim.SGD(embed.parameters(), lr=0.1, momentum=0.9)
embed.train()
for epoch in range(args.epochs):
    for index in torch.randperm(n).split(args.batch_size):
        v = F.normalize(embed(augment(data[index])), dim=1)
        loss = bank(v, index, args.nce_t)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        bank.update(v, index)
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save({"embed": embed.state_dict(), "bank": bank.state_dict()}, args.out)
