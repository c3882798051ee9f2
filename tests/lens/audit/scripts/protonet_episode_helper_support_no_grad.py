"""Prototypical networks with the episode in a helper at a tiny size, written after Snell,
Swersky and Zemel, "Prototypical Networks for Few-shot Learning" (NeurIPS 2017,
arXiv:1703.05175) and oscarknagg/few-shot (few_shot/proto.py, ``proto_net_episode``). Bug twin
of protonet_episode_helper.py: in the helper the loop calls, the support pass is written inside
the ``torch.no_grad()`` block that logs the queries' norm (``support = model(x_support)``
indented): the prototypes are cut and the model learns from the queries only, while the method
trains it through the support embeddings too. The fix is that line, out of the block; an edit
of the block's own line is as right (the logged norm trains nothing). ``--out PATH`` saves the
model's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--k-way", type=int, default=4)
parser.add_argument("--n-shot", type=int, default=2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, q_queries = 10, 12, 3
centers = 1.5 * torch.randn(classes, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)


def compute_prototypes(support, k, n):
    return support.reshape(k, n, -1).mean(dim=1)


def proto_net_episode(model, x_support, x_query, k_way, n_shot):
    queries = model(x_query)
    with torch.no_grad():
        query_norm = queries.norm(dim=1).mean()
        support = model(x_support)
    prototypes = compute_prototypes(support, k_way, n_shot)
    distances = (queries.unsqueeze(1) - prototypes.unsqueeze(0)).pow(2).sum(dim=2)
    return -distances, query_norm


for step in range(args.steps):
    chosen = torch.randperm(classes)[:args.k_way]
    points = centers[chosen].unsqueeze(1) + 0.8 * torch.randn(args.k_way,
                                                              args.n_shot + q_queries, dim)
    x_support = points[:, :args.n_shot].reshape(-1, dim)
    x_query = points[:, args.n_shot:].reshape(-1, dim)
    y = torch.arange(args.k_way).repeat_interleave(q_queries)
    logits, query_norm = proto_net_episode(model, x_support, x_query, args.k_way, args.n_shot)
    loss = F.cross_entropy(logits, y)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    print(f"step {step} loss {loss.item():.4f} query norm {query_norm.item():.3f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
