"""Linear probing then fine-tuning (LP-FT) at a tiny size, written after Kumar et al.,
"Fine-Tuning can Distort Pretrained Features and Underperform Out-of-Distribution"
(arXiv:2202.10054) and the linear-probe loop of facebookresearch/moco main_lincls.py (the
backbone's features under ``torch.no_grad()``, only the head trained): first the head alone
is trained on frozen features, then backbone and head are fine-tuned together at a smaller
learning rate. A "pretrained" backbone: one trained briefly in the script on an auxiliary
regression task. Data made in the script. Three loops, one after the other. Injected bug, in
the last loop only: the probe's ``with torch.no_grad():`` is kept in the fine-tuning loop, so
the backbone, in the optimizer, gets no gradient and never moves."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 3
inputs = torch.randn(128, dim)
aux_targets = inputs @ torch.randn(dim, 4)
labels = (inputs[:, :3] * torch.tensor([1.0, -1.0, 0.5])).argmax(1)
batches = list(zip(inputs.split(32), labels.split(32), aux_targets.split(32)))

backbone = nn.Sequential(nn.Linear(dim, 24), nn.ReLU(), nn.Linear(24, 16), nn.ReLU())
aux_head = nn.Linear(16, 4)
head = nn.Linear(16, classes)

pretrain_optimizer = torch.optim.Adam([*backbone.parameters(), *aux_head.parameters()], lr=1e-2)
for epoch in range(args.epochs):
    for x, _, aux in batches:
        loss = F.mse_loss(aux_head(backbone(x)), aux)
        pretrain_optimizer.zero_grad()
        loss.backward()
        pretrain_optimizer.step()
    print(f"pretrain epoch {epoch} loss {loss.item():.4f}")

backbone.eval()
probe_optimizer = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
for epoch in range(args.epochs):
    for x, y, _ in batches:
        with torch.no_grad():
            features = backbone(x)
        loss = F.cross_entropy(head(features), y)
        probe_optimizer.zero_grad()
        loss.backward()
        probe_optimizer.step()
    print(f"probe epoch {epoch} loss {loss.item():.4f}")

backbone.train()
finetune_optimizer = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.02,
                                     momentum=0.9)
for epoch in range(args.epochs):
    for x, y, _ in batches:
        with torch.no_grad():
            features = backbone(x)
        loss = F.cross_entropy(head(features), y)
        finetune_optimizer.zero_grad()
        loss.backward()
        finetune_optimizer.step()
    print(f"finetune epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save({"backbone": backbone.state_dict(), "head": head.state_dict(),
                "aux_head": aux_head.state_dict()}, args.out)
