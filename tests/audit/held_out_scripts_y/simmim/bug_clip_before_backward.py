"""SimMIM pre-training of a tiny patch transformer on synthetic images.

Paper: Zhenda Xie, Zheng Zhang, Yue Cao, Yutong Lin, Jianmin Bao, Zhuliang Yao, Qi Dai and
Han Hu, "SimMIM: A Simple Framework for Masked Image Modeling", CVPR 2022, arXiv:2111.09886.
Reference implementation: microsoft/SimMIM, models/simmim.py (VisionTransformerForSimMIM.forward,
SimMIM.forward), main_simmim.py (train_one_epoch), optimizer.py (build_optimizer with the
no-weight-decay skip list) and data/data_simmim.py (MaskGenerator).

Random smooth 16x16 RGB images are cut into 4x4 patches and embedded by a strided conv. A
MaskGenerator hides half of the 16 mask units (one unit per model patch here); the embeddings
of hidden patches are replaced by a learnable mask token through the blend
x * (1 - w) + mask_token * w, so the token is trained only through masked positions. A fixed
sin-cos position code is added and two pre-norm transformer blocks follow. A one-layer linear
prediction head (the 1x1 conv plus pixel shuffle of the reference) regresses raw pixels of every
patch and the L1 loss is averaged over the masked pixels only. Encoder, mask token and head are
trained together by AdamW (no weight decay on the token, biases and norms); the gradient norm is
clipped after backward and before the step. Nothing is cut: the target is the input image
itself, and only the fixed position code is kept out of training. Bug: the clipping call
sits before loss.backward(), right after zero_grad, so it clips gradients that were just
cleared and the step uses the unclipped gradient.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def sincos_pos_embed(dim, grid):
    ys, xs = torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij")
    omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float32) / (dim // 4))
    out = []
    for pos in (ys.flatten().float(), xs.flatten().float()):
        ang = pos[:, None] * omega[None]
        out += [ang.sin(), ang.cos()]
    return torch.cat(out, dim=1).unsqueeze(0)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        B, L, D = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(B, L, 3, self.heads, D // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.heads)
        h = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, L, D)
        x = x + self.proj(h)
        return x + self.mlp(self.norm2(x))


class EncoderForSimMIM(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=3, dim=32, depth=2, heads=4):
        super().__init__()
        self.patch_size = patch_size
        self.in_chans = in_chans
        self.num_features = dim
        self.patch_embed = nn.Conv2d(in_chans, dim, patch_size, stride=patch_size)
        grid = img_size // patch_size
        self.pos_embed = nn.Parameter(sincos_pos_embed(dim, grid), requires_grad=False)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        nn.init.trunc_normal_(self.mask_token, std=0.02, a=-0.02, b=0.02)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, mask):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        B, L, _ = x.shape
        mask_tokens = self.mask_token.expand(B, L, -1)
        w = mask.flatten(1).unsqueeze(-1).type_as(mask_tokens)
        x = x * (1.0 - w) + mask_tokens * w
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


class SimMIM(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.patch_size = encoder.patch_size
        self.in_chans = encoder.in_chans
        self.decoder = nn.Linear(encoder.num_features, self.patch_size ** 2 * self.in_chans)

    def forward(self, x, mask):
        z = self.encoder(x, mask)
        B, L, _ = z.shape
        g, p, c = int(L ** 0.5), self.patch_size, self.in_chans
        x_rec = self.decoder(z).reshape(B, g, g, c, p, p)
        x_rec = x_rec.permute(0, 3, 1, 4, 2, 5).reshape(B, c, g * p, g * p)
        mask = mask.repeat_interleave(p, 1).repeat_interleave(p, 2).unsqueeze(1)
        loss_recon = F.l1_loss(x, x_rec, reduction="none")
        return (loss_recon * mask).sum() / (mask.sum() + 1e-5) / self.in_chans


def mask_generator(batch, img_size, mask_patch, model_patch, ratio):
    units = img_size // mask_patch
    scale = mask_patch // model_patch
    count = int(math.ceil(units * units * ratio))
    idx = torch.rand(batch, units * units).argsort(dim=1)[:, :count]
    mask = torch.zeros(batch, units * units)
    mask.scatter_(1, idx, 1.0)
    mask = mask.reshape(batch, units, units)
    return mask.repeat_interleave(scale, 1).repeat_interleave(scale, 2)


def make_images(n, size, chans):
    coords = torch.linspace(-1, 1, size)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    freq = torch.rand(n, 2, 2) * 2.0 + 0.5
    phase = torch.rand(n, 2, 1, 1) * 2 * math.pi
    gray = torch.sin(freq[..., 0, None, None] * yy + freq[..., 1, None, None] * xx + phase)
    color = torch.rand(n, 2, chans, 1, 1) * 2 - 1
    img = (gray.unsqueeze(2) * color).sum(dim=1)
    return img + 0.02 * torch.randn(n, chans, size, size)


def param_groups(model, skip=("mask_token",)):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim == 1 or name.endswith(".bias") or name.split(".")[-1] in skip:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--clip_grad", type=float, default=0.25)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    img_size, patch = 16, 4
    images = make_images(512, img_size, 3)
    model = SimMIM(EncoderForSimMIM(img_size=img_size, patch_size=patch))
    optimizer = torch.optim.AdamW(param_groups(model), lr=5e-3, weight_decay=0.05,
                                  betas=(0.9, 0.999))

    model.train()
    for it in range(args.steps):
        idx = torch.randint(0, images.shape[0], (args.batch,))
        img = images[idx]
        mask = mask_generator(args.batch, img_size, 4, patch, 0.5)
        loss = model(img, mask)

        optimizer.zero_grad()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        loss.backward()
        optimizer.step()

        if it % 10 == 0 or it == args.steps - 1:
            print(f"step {it:3d} loss {loss.item():.4f} grad_norm {float(grad_norm):.3f}")

    if args.out:
        torch.save({"model": model.state_dict()}, args.out)


if __name__ == "__main__":
    main()
