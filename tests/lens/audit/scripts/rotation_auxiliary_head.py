"""A classifier with an auxiliary rotation-prediction head at a tiny size, written after
Hendrycks, Mazeika, Kadavath and Song, "Using Self-Supervised Learning Can Improve Model
Robustness and Uncertainty" (NeurIPS 2019, arXiv:1906.12340) and hendrycks/ss-ood
(adversarial/train.py, ``train``: the batch and its rotations by 90, 180 and 270 degrees in one
forward pass, ``loss = F.cross_entropy(logits[:curr_batch_size], by)`` plus ``0.5 *
F.cross_entropy(net.rot_pred(pen[curr_batch_size:]), by_prime)``), the rotation task of Gidaris,
Singh and Komodakis, "Unsupervised Representation Learning by Predicting Image Rotations" (ICLR
2018, arXiv:1803.07728): a shared convolutional trunk, a class head and a rotation head; the
rotation head's cross-entropy trains the head and, through it, the trunk. Small images made in
the script (a random pattern per class plus noise). SGD with momentum. As published: clean.
``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--rot-weight", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

side, classes = 6, 3
patterns = torch.randn(classes, 1, side, side)
labels = torch.randint(0, classes, (48,))
images = patterns[labels] + 0.3 * torch.randn(48, 1, side, side)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(),
                                   nn.Linear(4 * (side - 2) ** 2, 16), nn.ReLU())
        self.cls_head = nn.Linear(16, classes)
        self.rot_head = nn.Linear(16, 4)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for step in range(args.steps):
    x = images[8 * (step % 6):8 * (step % 6) + 8]
    y = labels[8 * (step % 6):8 * (step % 6) + 8]
    rotated = torch.cat([torch.rot90(x, k, dims=(2, 3)) for k in range(4)])
    rotation = torch.arange(4).repeat_interleave(len(x))
    pen = model.trunk(torch.cat([x, rotated]))
    logits = model.cls_head(pen[:len(x)])
    rot_logits = model.rot_head(pen[len(x):])
    loss = F.cross_entropy(logits, y) + args.rot_weight * F.cross_entropy(rot_logits, rotation)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
