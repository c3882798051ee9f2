"""R-Drop at a tiny size, written after Liang, Wu, Li, Wang, Meng, Qin, Chen, Zhang and Liu,
"R-Drop: Regularized Dropout for Neural Networks" (NeurIPS 2021, arXiv:2106.14448), Algorithm 1,
with the loss of dropreg/R-Drop (https://github.com/dropreg/R-Drop, README.md compute_kl_loss and
huggingface_transformer_src/bert_rdrop): every minibatch goes twice through the network with dropout
on, both passes keep their graphs, and the loss is the mean of the two cross-entropies plus
``alpha`` times the symmetric KL divergence between the two predicted distributions, so the KL term
trains the network through both passes. Two phases, as in the paper's fine-tuning experiments: the
network is first trained with plain cross-entropy, then fine-tuned with R-Drop. An MLP classifier
with dropout on vectors made in the script. Injected bug: the second pass runs under
torch.no_grad(), as if it were a target, so the second cross-entropy trains nothing and the KL term
trains the network through the first pass only; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=8)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--alpha", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 4
means = torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


def compute_kl_loss(p, q):
    p_loss = F.kl_div(F.log_softmax(p, dim=-1), F.softmax(q, dim=-1), reduction="none")
    q_loss = F.kl_div(F.log_softmax(q, dim=-1), F.softmax(p, dim=-1), reduction="none")
    return (p_loss.sum() + q_loss.sum()) / 2


model = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 64),
                      nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, classes))
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

# phase 1: plain cross-entropy
for step in range(args.pretrain_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: fine-tuning with R-Drop
for step in range(args.steps):
    x, y = batch(args.batch_size)
    logits = model(x)
    with torch.no_grad():
        logits2 = model(x)
    ce_loss = 0.5 * (F.cross_entropy(logits, y) + F.cross_entropy(logits2, y))
    kl_loss = compute_kl_loss(logits, logits2) / args.batch_size
    loss = ce_loss + args.alpha * kl_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} ce {ce_loss.item():.4f} kl {kl_loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
