"""A depth-elastic supernet trained by the sandwich rule with in-place distillation, at a tiny
size, written after Yu, Jin, Liu, Bender, Kindermans, Tan, Huang, Song, Pang and Le, "BigNAS:
Scaling Up Neural Architecture Search with Big Single-Stage Models" (ECCV 2020,
arXiv:2003.11142), as facebookresearch/AttentiveNAS implements it (Wang et al., CVPR 2021;
train_attentive_nas.py, its train_epoch), with the elastic depth of Cai, Gan, Wang, Zhang and
Han, "Once-for-All" (ICLR 2020; mit-han-lab/once-for-all). Two phases: a warm-up that trains
the full-depth network alone (one backward per step), then the sandwich: each step trains the
full depth on the labels (a backward that keeps the graph, the stem's output being shared by
every depth of the step), takes the full depth's softened prediction as the soft target, and
distils it into the smallest depth and a random one, one backward each, then one SGD step.
As published: the soft target is made with ``.detach()`` (AttentiveNAS clones the largest
network's output under ``torch.no_grad()``): the full depth is trained by its cross-entropy
alone, and the shallower depths by the distillation.
``--out PATH`` saves the supernet's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=6)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, width = 10, 4, 32
means = 1.2 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class ElasticDepthNet(nn.Module):
    """A stem, residual blocks of which the first ``depth`` run, and one classifier."""

    def __init__(self, blocks=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(dim, width), nn.ReLU())
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.Tanh())
                                    for _ in range(blocks))
        self.head = nn.Linear(width, classes)

    def run(self, h, depth):
        for block in self.blocks[:depth]:
            h = h + block(h)
        return self.head(h)

    def forward(self, x):
        return self.run(self.stem(x), len(self.blocks))


model = ElasticDepthNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
max_depth, min_depth = len(model.blocks), 1

# warm-up: the full-depth network alone
for step in range(args.pretrain_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.4f}")

# the sandwich rule: the full depth, then the smallest depth and a random one
for step in range(args.steps):
    x, y = batch(args.batch_size)
    optimizer.zero_grad()
    h = model.stem(x)
    full_logits = model.run(h, max_depth)
    loss = F.cross_entropy(full_logits, y)
    loss.backward(retain_graph=True)
    soft_target = F.softmax(full_logits, dim=1).detach()
    depths = [min_depth, int(torch.randint(min_depth + 1, max_depth, ()))]
    for depth in depths:
        logits = model.run(h, depth)
        distill = -(soft_target * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
        distill.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} distill {distill.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
