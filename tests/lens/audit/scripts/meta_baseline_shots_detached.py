"""Meta-Baseline at a tiny size, written after Chen, Liu, Xu, Darrell and Wang, "Meta-Baseline:
Exploring Simple Meta-Learning for Few-Shot Learning" (ICCV 2021, arXiv:2003.04390) and
yinboc/few-shot-meta-baseline (train_classifier.py, train_meta.py, models/meta_baseline.py,
``MetaBaseline.forward``). Bug twin of meta_baseline.py: the first stage (Classifier-Baseline)
is as published; in the second stage, the meta-training loop, the prototypes are detached
where the shots' embeddings are averaged (``x_shot = shots.view(...).mean(1).detach()``). The
cosine softmax still trains the encoder through the queries and the temperature, but the
encoder no longer learns through the prototypes, which the method asks (they are made by the
same encoder in the same step). The bug begins late: its first update is the meta stage's
first, after the four updates of the first stage. The fix is that line, without the
``.detach()``. ``--out PATH`` saves the encoder's weights and the temperature."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=4)
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--n-way", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, n_shot, n_query = 10, 12, 2, 3
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (128,))
points = centers[labels] + 0.8 * torch.randn(128, dim)

encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
classifier = nn.Linear(16, classes)
pretrain = torch.optim.SGD([*encoder.parameters(), *classifier.parameters()], lr=0.1,
                           momentum=0.9)
for step in range(args.pretrain_steps):
    x = points[32 * (step % 4):32 * (step % 4) + 32]
    y = labels[32 * (step % 4):32 * (step % 4) + 32]
    loss = F.cross_entropy(classifier(encoder(x)), y)
    pretrain.zero_grad()
    loss.backward()
    pretrain.step()
    print(f"classifier step {step} loss {loss.item():.4f}")

temp = nn.Parameter(torch.tensor(10.0))
optimizer = torch.optim.SGD([*encoder.parameters(), temp], lr=0.01, momentum=0.9)
for step in range(args.steps):
    chosen = torch.randperm(classes)[:args.n_way]
    episode = centers[chosen].unsqueeze(1) + 0.8 * torch.randn(args.n_way, n_shot + n_query, dim)
    shots = encoder(episode[:, :n_shot].reshape(-1, dim))
    x_shot = shots.view(args.n_way, n_shot, -1).mean(1).detach()
    x_query = encoder(episode[:, n_shot:].reshape(-1, dim))
    logits = temp * F.normalize(x_query, dim=-1) @ F.normalize(x_shot, dim=-1).T
    loss = F.cross_entropy(logits, torch.arange(args.n_way).repeat_interleave(n_query))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"meta step {step} loss {loss.item():.4f} temp {temp.item():.3f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                "temp": temp.detach()}, args.out)
