"""ResMLP at a tiny size, written after Touvron et al., "ResMLP: Feedforward networks for image
classification with data-efficient training" (arXiv:2105.03404) and facebookresearch/deit
(https://github.com/facebookresearch/deit/blob/main/resmlp_models.py: ``Affine`` with its
``alpha`` and ``beta``, and each block's per-channel LayerScale ``gamma_1``/``gamma_2`` made as
``nn.Parameter``), trained with AdamW over timm's parameter groups
(https://github.com/huggingface/pytorch-image-models/blob/main/timm/optim/_param_groups.py,
``param_groups_weight_decay``: tensors of one dimension or fewer, or named ``.bias``, without
weight decay). Images are 4x4 grids of random patches whose class is set by the mean of one
channel, made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

num_patches, patch_dim, n_classes = 16, 6, 3
labels = torch.arange(96) % n_classes
patches = torch.randn(96, num_patches, patch_dim)
patches[:, :, 0] += labels[:, None].float()


class Affine(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.alpha * x + self.beta


class LayerScaleMLPBlock(nn.Module):
    def __init__(self, dim, num_patches, init_values=0.1):
        super().__init__()
        self.norm1 = Affine(dim)
        self.attn = nn.Linear(num_patches, num_patches)
        self.norm2 = Affine(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gamma_1 = nn.Parameter(torch.full((dim,), init_values))
        self.gamma_2 = nn.Parameter(torch.full((dim,), init_values))

    def forward(self, x):
        x = x + self.gamma_1 * self.attn(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class ResMLP(nn.Module):
    def __init__(self, patch_dim, dim, depth, num_patches, n_classes):
        super().__init__()
        self.patch_embed = nn.Linear(patch_dim, dim)
        self.blocks = nn.ModuleList(LayerScaleMLPBlock(dim, num_patches) for _ in range(depth))
        self.norm = Affine(dim)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x).mean(dim=1))


model = ResMLP(patch_dim, 12, 2, num_patches, n_classes)
decay, no_decay = [], []
for name, param in model.named_parameters():
    if param.ndim <= 1 or name.endswith(".bias"):
        no_decay.append(param)
    else:
        decay.append(param)
optimizer = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                               {"params": decay, "weight_decay": 0.05}], lr=3e-3)
for epoch in range(args.epochs):
    for i in range(0, len(patches), args.batch_size):
        loss = F.cross_entropy(model(patches[i:i + args.batch_size]),
                               labels[i:i + args.batch_size])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save({"state": model.state_dict(),
                "gammas": [(b.gamma_1.detach(), b.gamma_2.detach()) for b in model.blocks]},
               args.out)
