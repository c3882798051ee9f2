"""AugMix's Jensen-Shannon consistency at a tiny size, written after Hendrycks, Mu, Cubuk, Zoph,
Gilmer and Lakshminarayanan, "AugMix: A Simple Data Processing Method to Improve Robustness and
Uncertainty" (ICLR 2020, arXiv:1912.02781) and google-research/augmix (augment_and_mix.py,
``augment_and_mix``: a convex mix, by Dirichlet weights, of a few chains of random operations,
skip-connected by a Beta weight; cifar.py, ``train``: the clean and two augmented views through
one network, the cross-entropy of the clean view plus ``12 * (KL(M || p_clean) + KL(M || p_aug1)
+ KL(M || p_aug2)) / 3`` with the mixture ``M`` made from the three predictions, nothing cut).
The views here are vectors and the operations small vector transforms. One network, SGD with
momentum. Points made in the script. Clean: the consistency trains through every view as
published. ``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

operations = [
    lambda v: v + 0.3 * torch.randn_like(v),
    lambda v: v * (1.0 + 0.2 * torch.randn(1)),
    lambda v: torch.roll(v, 1, dims=1),
    lambda v: v.clamp(-1.5, 1.5),
]


def augment_and_mix(x, width=3, depth=2, alpha=1.0):
    ws = torch.distributions.Dirichlet(torch.full((width,), alpha)).sample()
    m = torch.distributions.Beta(alpha, alpha).sample()
    mix = torch.zeros_like(x)
    for i in range(width):
        chain = x
        for _ in range(depth):
            chain = operations[int(torch.randint(len(operations), (1,)))](chain)
        mix = mix + ws[i] * chain
    return (1 - m) * x + m * mix


for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    logits_all = model(torch.cat([x, augment_and_mix(x), augment_and_mix(x)]))
    logits_clean, logits_aug1, logits_aug2 = torch.split(logits_all, len(x))
    loss = F.cross_entropy(logits_clean, y)
    p_clean = F.softmax(logits_clean, dim=1)
    p_aug1, p_aug2 = F.softmax(logits_aug1, dim=1), F.softmax(logits_aug2, dim=1)
    p_mixture = torch.clamp((p_clean + p_aug1 + p_aug2) / 3.0, 1e-7, 1).log()
    jsd = (F.kl_div(p_mixture, p_clean, reduction="batchmean")
           + F.kl_div(p_mixture, p_aug1, reduction="batchmean")
           + F.kl_div(p_mixture, p_aug2, reduction="batchmean")) / 3.0
    loss = loss + 12 * jsd
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} jsd {jsd.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
