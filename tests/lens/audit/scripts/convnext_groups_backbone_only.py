"""A ConvNeXt-style classifier fine-tuned at a tiny size, written after Liu et al., "A ConvNet for
the 2020s" (CVPR 2022, arXiv:2201.03545): depthwise 7x7 convolution, LayerNorm, an inverted
MLP and a layer scale in each block, a LayerNorm and a linear head on the pooled features. The
optimizer is AdamW over the parameter groups of timm's ``param_groups_weight_decay``
(https://github.com/huggingface/pytorch-image-models, timm/optim/_param_groups.py): no weight
decay on biases and other tensors of one dimension, built over the whole model. Images of a
bright square in one of four quadrants in noise, made in the script. The bug: the groups built
over ``model.backbone`` only, so the final LayerNorm and the head, which the loss trains, are
never stepped."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)


def batch(n):
    quadrant = torch.randint(0, 4, (n,))
    images = 0.2 * torch.randn(n, 3, 8, 8)
    for i in range(n):
        r, c = divmod(int(quadrant[i]), 2)
        images[i, :, 4 * r:4 * r + 4, 4 * c:4 * c + 4] += 1.0
    return images, quadrant


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-1 * torch.ones(dim))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, dim=8, classes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, dim, 2, stride=2), Block(dim), Block(dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(self.norm(self.backbone(x).mean((2, 3))))


def param_groups_weight_decay(model, weight_decay):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim <= 1 or name.endswith(".bias") else decay).append(param)
    return [{"params": no_decay, "weight_decay": 0.0},
            {"params": decay, "weight_decay": weight_decay}]


model = ConvNeXt()
optimizer = torch.optim.AdamW(param_groups_weight_decay(model.backbone, 0.05), lr=4e-3)
for step in range(args.steps):
    images, labels = batch(args.batch_size)
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
