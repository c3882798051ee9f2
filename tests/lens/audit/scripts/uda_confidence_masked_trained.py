"""Unsupervised data augmentation with a sharpened, confidence-masked target, after a supervised
warm-up: two phases, at a tiny size, written after Xie, Dai, Hovy, Luong and Le, "Unsupervised
Data Augmentation for Consistency Training" (NeurIPS 2020, arXiv:1904.12848, Section 3.2 and
Appendix: confidence-based masking and softmax sharpening; google-research/uda, image/main.py,
the KL divergence to ``tf.stop_gradient`` of the original's sharpened logits). Phase 1 trains
the classifier (with dropout) on the labelled rows alone. Phase 2, with the same optimizer, adds
the consistency term: the classifier's prediction on each unlabelled sample as it is, sharpened
by the temperature ``T``, is the target of its prediction on a strongly augmented copy (noise
and a feature mask), by KL divergence, on the rows whose unsharpened confidence exceeds
``--threshold`` alone. Both sides are the same network under dropout, but they are not mirror
images: the target comes from the other input pipeline, through a sharpening and a mask, and
the published code cuts it. The bug: the sharpened target is not detached, so the consistency
term also trains the classifier through its own target. Data: three Gaussian clusters, 24
labelled rows and 192 unlabelled ones, made in the script. ``--out PATH`` saves the weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=6)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--T", type=float, default=0.4)
parser.add_argument("--threshold", type=float, default=0.6)
parser.add_argument("--lambda-u", type=float, default=1.0)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 6, 3
centres = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (24,))
labelled = centres[labels] + torch.randn(24, dim)
unlabelled = centres[torch.randint(0, classes, (192,))] + torch.randn(192, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)


def strong_augment(x):
    return (x + 0.5 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2)


for step in range(args.pretrain_steps):
    rows = torch.randperm(24)[:args.batch_size]
    loss = F.cross_entropy(model(labelled[rows]), labels[rows])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.4f}")

for step in range(args.steps):
    rows = torch.randperm(24)[:args.batch_size]
    xu = unlabelled[torch.randperm(192)[:4 * args.batch_size]]
    supervised = F.cross_entropy(model(labelled[rows]), labels[rows])
    ori_logits = model(xu)
    confident = F.softmax(ori_logits, dim=1).max(dim=1).values > args.threshold
    targets = F.softmax(ori_logits / args.T, dim=1)
    aug_log_probs = F.log_softmax(model(strong_augment(xu)), dim=1)
    kl = F.kl_div(aug_log_probs, targets, reduction="none").sum(dim=1)
    consistency = (kl * confident).mean()
    loss = supervised + args.lambda_u * consistency
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} confident {int(confident.sum())}")

if args.out:
    torch.save(model.state_dict(), args.out)
