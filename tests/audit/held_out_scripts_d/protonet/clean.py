"""Prototypical networks at a tiny size, written after Snell, Swersky and Zemel, "Prototypical
Networks for Few-shot Learning" (NeurIPS 2017), Algorithm 1, with the episode loss of
jakesnell/prototypical-networks (https://github.com/jakesnell/prototypical-networks,
protonets/models/few_shot.py): each episode samples ``N`` classes with ``K`` support and ``Q``
query examples, the prototypes are the means of the embedded support examples, and the queries
are classified by a softmax over negative squared Euclidean distances to the prototypes; the loss
trains the embedding through both the queries and the prototypes. An MLP embedding on classes of
vectors made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=20)
parser.add_argument("--way", type=int, default=5)
parser.add_argument("--shot", type=int, default=3)
parser.add_argument("--query", type=int, default=5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, total_classes, embed_dim = 16, 30, 8
class_means = 1.2 * torch.randn(total_classes, dim)


def episode():
    classes = torch.randperm(total_classes)[: args.way]
    samples = class_means[classes].unsqueeze(1) + torch.randn(args.way, args.shot + args.query, dim)
    return samples[:, : args.shot], samples[:, args.shot:]


encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, embed_dim))
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
targets = torch.arange(args.way).repeat_interleave(args.query)
for step in range(args.episodes):
    support, query = episode()
    z_support = encoder(support.reshape(-1, dim)).view(args.way, args.shot, embed_dim)
    prototypes = z_support.mean(1)
    z_query = encoder(query.reshape(-1, dim))
    log_p = F.log_softmax(-torch.cdist(z_query, prototypes).pow(2), dim=1)
    loss = F.nll_loss(log_p, targets)
    acc = (log_p.argmax(1) == targets).float().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"episode {step} loss {loss.item():.4f} acc {acc.item():.2f}")

if args.out:
    torch.save(encoder.state_dict(), args.out)
