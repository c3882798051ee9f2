"""Non-parametric instance discrimination with a memory bank at a tiny size, written after Wu,
Xiong, Yu and Lin, "Unsupervised Feature Learning via Non-Parametric Instance Discrimination"
(CVPR 2018, arXiv:1805.01978) and zhirongw/lemniscate.pytorch (lib/LinearAverage.py,
``LinearAverageOp``, and main.py with the full softmax): every sample is its own class; the
query is the normalised feature of an augmented sample, the keys are the rows of a memory bank
of features of every sample, written in earlier iterations; the logits are their dot products
over a temperature, the target the sample's own index; after the step the sample's row is
moved towards its new feature, detached, and renormalised. The keys are cut on purpose: they
are features of earlier steps. Vectors made in the script, views by masking and noise. SGD with
momentum. As published: clean. ``--out PATH`` saves the network's weights and the memory."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--nce-t", type=float, default=0.1)
parser.add_argument("--nce-m", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat, n = 12, 8, 64
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (n,))] + 0.3 * torch.randn(n, dim)

net = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
stdv = 1.0 / (feat / 3) ** 0.5
memory = torch.rand(n, feat).mul_(2 * stdv).add_(-stdv)
optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    index = torch.arange(16 * (step % 4), 16 * (step % 4) + 16)
    features = F.normalize(net(augment(data[index])), dim=1)
    outputs = features @ memory.T / args.nce_t
    loss = F.cross_entropy(outputs, index)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    weight_pos = memory[index] * args.nce_m + features.detach() * (1 - args.nce_m)
    memory[index] = F.normalize(weight_pos, dim=1)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"net.{k}": v for k, v in net.state_dict().items()}, "memory": memory},
               args.out)
