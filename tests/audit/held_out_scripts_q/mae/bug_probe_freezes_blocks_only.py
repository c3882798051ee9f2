"""Masked autoencoder (MAE) pretraining and linear probing at a tiny size, written after He, Chen,
Xie, Li, Dollar and Girshick, "Masked Autoencoders Are Scalable Vision Learners" (CVPR 2022,
arXiv:2111.06377), sections 3 and 4: an image is split into patches, a random 75% of them is
removed, a ViT encoder sees only the visible patches (plus a class token), a light decoder gets
the encoded tokens with a shared learnt mask token at every removed position and regresses the
(per-patch normalised) pixels, the loss being the mean squared error on the removed patches only;
the encoder is then evaluated by linear probing: frozen, its class token fed to a BatchNorm
without affine parameters and a linear classifier, the only part that trains. With
facebookresearch/mae (https://github.com/facebookresearch/mae, models_mae.py
MaskedAutoencoderViT: random_masking keeps the first len_keep patches of a per-sample argsort of
uniform noise and returns the binary mask and ids_restore, forward_encoder adds the fixed
sin-cos pos_embed (requires_grad=False) before masking and prepends cls_token, forward_decoder
appends mask_token copies, unshuffles with ids_restore and adds decoder_pos_embed, forward_loss
normalises the target patches when norm_pix_loss and averages the squared error over the
removed patches; engine_pretrain.py train_one_epoch: the loss scaler's backward and step of an
AdamW over the whole model, then optimizer.zero_grad(); main_linprobe.py: the head replaced by
BatchNorm1d(affine=False, eps=1e-6) followed by the linear layer with trunc_normal_(std=0.01),
requires_grad = False on every parameter of the model and True on the head's, LARS over
model.head.parameters(), and engine_finetune.py train_one_epoch with model.train(True) and
CrossEntropyLoss). Two phases: phase 1 pretrains a one-block encoder and a one-block decoder on
8x8 images made in the script (oriented stripes of four classes, with a blob and noise) cut into
2x2 patches; phase 2 probes the frozen encoder's class token on the four classes, with SGD and
momentum in place of LARS, over the parameters that still require grad.
Bug: the probing phase freezes only the encoder's Transformer blocks,
probe.encoder.blocks.requires_grad_(False), where the whole encoder is meant (main_linprobe.py
sets requires_grad = False on every parameter of the model and True on the head's alone, and
hands LARS model.head.parameters()), so patch_embed, cls_token and the final norm still require
grad, are picked up by the optimizer built over the parameters that require grad, and are
fine-tuned on the labels through the frozen blocks: the probe no longer measures the pretrained
representation, and the saved encoder is not the pretrained one."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=40)
parser.add_argument("--probe-steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--mask-ratio", type=float, default=0.75)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

image_size, patch_size, embed_dim, decoder_dim, num_classes = 8, 2, 32, 16, 4
grid = image_size // patch_size
num_patches, patch_dim = grid * grid, patch_size * patch_size


def make_images(n):
    """Stripes whose orientation is the class, a random frequency and phase, a blob and noise."""
    labels = torch.randint(0, num_classes, (n,))
    angle = labels.float() * math.pi / num_classes + 0.1 * torch.randn(n)
    coords = torch.arange(image_size).float()
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    freq = (0.8 + 0.6 * torch.rand(n)).view(n, 1, 1)
    phase = (torch.rand(n) * 2 * math.pi).view(n, 1, 1)
    proj = xx * angle.cos().view(n, 1, 1) + yy * angle.sin().view(n, 1, 1)
    centre = torch.rand(n, 2, 1, 1) * image_size
    blob = torch.exp(-((xx - centre[:, 0]) ** 2 + (yy - centre[:, 1]) ** 2) / 4.0)
    images = torch.sin(freq * proj + phase) + 0.5 * blob + 0.2 * torch.randn(n, image_size, image_size)
    return images.unsqueeze(1), labels


def patchify(images):
    n = images.shape[0]
    x = images.reshape(n, 1, grid, patch_size, grid, patch_size)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(n, num_patches, patch_dim)


def sincos_pos_embed(dim):
    """Fixed 2D sin-cos position embedding with a zero row for the class token."""
    omega = 1.0 / 10000 ** (torch.arange(dim // 4).float() / (dim // 4))
    coords = torch.arange(grid).float()
    gy, gx = torch.meshgrid(coords, coords, indexing="ij")
    parts = []
    for pos in (gy.reshape(-1), gx.reshape(-1)):
        out = pos[:, None] * omega[None, :]
        parts += [out.sin(), out.cos()]
    return torch.cat([torch.zeros(1, dim), torch.cat(parts, 1)], 0).unsqueeze(0)


class Block(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)).softmax(-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Linear(patch_dim, embed_dim)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, embed_dim))
        self.register_buffer("pos_embed", sincos_pos_embed(embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)

    def forward(self, patches, mask_ratio=0.0):
        n = patches.shape[0]
        x = self.patch_embed(patches) + self.pos_embed[:, 1:]
        len_keep = int(num_patches * (1 - mask_ratio))
        ids_shuffle = torch.argsort(torch.rand(n, num_patches), dim=1)
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        x = torch.gather(x, 1, ids_shuffle[:, :len_keep, None].expand(-1, -1, embed_dim))
        mask = torch.ones(n, num_patches)
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, 1, ids_restore)
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(n, -1, -1)
        x = torch.cat([cls, x], 1)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x), mask, ids_restore


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder_embed = nn.Linear(embed_dim, decoder_dim)
        self.mask_token = nn.Parameter(0.02 * torch.randn(1, 1, decoder_dim))
        self.register_buffer("decoder_pos_embed", sincos_pos_embed(decoder_dim))
        self.blocks = nn.ModuleList([Block(decoder_dim)])
        self.norm = nn.LayerNorm(decoder_dim, eps=1e-6)
        self.pred = nn.Linear(decoder_dim, patch_dim)

    def forward(self, latent, ids_restore):
        x = self.decoder_embed(latent)
        n, kept = x.shape[0], x.shape[1] - 1
        x_ = torch.cat([x[:, 1:], self.mask_token.expand(n, num_patches - kept, -1)], 1)
        x_ = torch.gather(x_, 1, ids_restore[:, :, None].expand(-1, -1, decoder_dim))
        x = torch.cat([x[:, :1], x_], 1) + self.decoder_pos_embed
        for blk in self.blocks:
            x = blk(x)
        return self.pred(self.norm(x))[:, 1:]


class LinearProbe(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Sequential(nn.BatchNorm1d(embed_dim, affine=False, eps=1e-6),
                                  nn.Linear(embed_dim, num_classes))
        nn.init.trunc_normal_(self.head[1].weight, std=0.01)
        nn.init.zeros_(self.head[1].bias)

    def forward(self, patches):
        latent, _, _ = self.encoder(patches)
        return self.head(latent[:, 0])


train_images, train_labels = make_images(1024)
train_patches = patchify(train_images)

# phase 1: masked autoencoder pretraining
encoder, decoder = Encoder(), Decoder()
mae_params = list(encoder.parameters()) + list(decoder.parameters())
optimizer = torch.optim.AdamW(mae_params, lr=1.5e-3, betas=(0.9, 0.95), weight_decay=0.05)
encoder.train()
decoder.train()
for step in range(args.pretrain_steps):
    idx = torch.randint(0, train_patches.shape[0], (args.batch_size,))
    patches = train_patches[idx]
    latent, mask, ids_restore = encoder(patches, args.mask_ratio)
    pred = decoder(latent, ids_restore)
    target = (patches - patches.mean(-1, keepdim=True)) / (patches.var(-1, keepdim=True) + 1e-6) ** 0.5
    loss = (((pred - target) ** 2).mean(-1) * mask).sum() / mask.sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 10 == 0:
        print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: linear probing of the frozen encoder's class token
probe = LinearProbe(encoder)
probe.encoder.blocks.requires_grad_(False)
probe.head.requires_grad_(True)
probe_optimizer = torch.optim.SGD([p for p in probe.parameters() if p.requires_grad], lr=0.1,
                                  momentum=0.9, weight_decay=0.0)
criterion = nn.CrossEntropyLoss()
probe.train()
for step in range(args.probe_steps):
    idx = torch.randint(0, train_patches.shape[0], (args.batch_size,))
    logits = probe(train_patches[idx])
    loss = criterion(logits, train_labels[idx])
    probe_optimizer.zero_grad()
    loss.backward()
    probe_optimizer.step()
    if step % 10 == 0:
        acc = (logits.argmax(1) == train_labels[idx]).float().mean().item()
        print(f"probe {step} loss {loss.item():.4f} acc {acc:.3f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"decoder.{k}": v for k, v in decoder.state_dict().items()},
                **{f"head.{k}": v for k, v in probe.head.state_dict().items()}}, args.out)
