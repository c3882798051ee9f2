"""Masked Siamese Networks (MSN) at a tiny size, written after Assran, Caron, Misra, Bojanowski,
Bordes, Vincent, Joulin, Rabbat and Ballas, "Masked Siamese Networks for Label-Efficient
Learning" (ECCV 2022, arXiv:2204.07141), section 3: several augmented views of an image are
encoded, the anchor views with a random part of their patches dropped, by a ViT with a
projection head; a target view, unmasked, is encoded by a target network that is an exponential
moving average of the anchor network; both representations are compared by cosine similarity
with a set of learnt prototypes, softmax at temperature tau; the target's assignment is sharpened
with temperature T and, with no gradient, is the target of a cross-entropy on each anchor's
assignment, and the mean-entropy maximisation term (me-max) pushes the anchors' average
assignment towards uniform over the prototypes. With facebookresearch/msn
(https://github.com/facebookresearch/msn, src/losses.py init_msn_loss: snn, the softmax of
normalised queries against normalised prototypes over tau times the one-hot prototype labels;
sharpen, p ** (1 / T) renormalised; loss, with the targets computed under torch.no_grad() and
repeated for every anchor view, the cross-entropy mean(sum(log(probs ** -targets))) and the
me-max term -sum(log(avg_probs ** -avg_probs)) + log(K); src/deit.py VisionTransformer
forward_features: patch_drop keeps a random floor((1 - patch_drop) * L) of the patch tokens
after the position embedding and before the blocks, and the class token goes through the norm
and the projection head fc; src/msn_train.py main: target_encoder = copy.deepcopy(encoder), the
prototypes a Parameter with uniform init in +-sqrt(1 / output_dim) and requires_grad, AdamW over
the encoder's weight-decayed and non-decayed groups plus a group for the prototypes without
weight decay, and train_step: optimizer.zero_grad(), the anchor views through the encoder with
patch_drop, the target view through target_encoder under torch.no_grad() and detached,
loss = ploss + memax_weight * me_max, backward, step, then the momentum update
param_k.mul_(m).add_((1 - m) * param_q) of the target encoder under torch.no_grad(), m rising
from its start value towards 1). The data: 8x8 images made in the script (stripes, a checker or a
blob with noise) cut into 2x2 patches; two anchor views and one target view per image by random
flips, shifts, contrast and noise; the momentum starts at 0.99 for the short run.
Bug: the target encoder is bound to the anchor encoder itself, target_encoder = encoder, where
a copy is meant (src/msn_train.py main builds target_encoder = copy.deepcopy(encoder) and moves
it after every step by param_k.mul_(m).add_((1 - m) * param_q) under torch.no_grad()), so the
momentum update blends each parameter with itself (mul_ running first, it scales it by
1 - (1 - m) ** 2) and, from the second step on, the unmasked target view is encoded, under
torch.no_grad(), by the anchor network with its latest weights: the slowly moving
exponential-average teacher of MSN is gone and the sharpened targets follow every step of the
network they are supervising."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--patch-drop", type=float, default=0.25)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

image_size, patch_size, embed_dim, hidden_dim, output_dim = 8, 2, 32, 64, 16
num_proto, num_anchor_views, tau, sharpen_T, memax_weight = 24, 2, 0.1, 0.25, 1.0
start_m, final_m = 0.99, 1.0
grid = image_size // patch_size
num_patches, patch_dim = grid * grid, patch_size * patch_size


def make_images(n):
    """One of three pattern kinds per image, with a random orientation, frequency or place."""
    coords = torch.arange(image_size).float()
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    kind = torch.randint(0, 3, (n, 1, 1))
    angle = torch.rand(n, 1, 1) * math.pi
    freq = 0.6 + 0.8 * torch.rand(n, 1, 1)
    stripes = torch.sin(freq * (xx * angle.cos() + yy * angle.sin()))
    checker = torch.sign(torch.sin(freq * xx) * torch.sin(freq * yy))
    centre = torch.rand(n, 2, 1, 1) * image_size
    blob = 2 * torch.exp(-((xx - centre[:, 0]) ** 2 + (yy - centre[:, 1]) ** 2) / 3.0) - 0.5
    images = torch.where(kind == 0, stripes, torch.where(kind == 1, checker, blob))
    return images + 0.1 * torch.randn(n, image_size, image_size)


def augment(images):
    n = images.shape[0]
    flip = torch.rand(n, 1, 1) < 0.5
    x = torch.where(flip, images.flip(-1), images)
    x = torch.roll(x, shifts=(int(torch.randint(-1, 2, ())), int(torch.randint(-1, 2, ()))), dims=(1, 2))
    x = x * (0.7 + 0.6 * torch.rand(n, 1, 1)) + 0.2 * torch.randn(n, 1, 1)
    return x + 0.1 * torch.randn_like(x)


def patchify(images):
    n = images.shape[0]
    x = images.reshape(n, grid, patch_size, grid, patch_size)
    return x.permute(0, 1, 3, 2, 4).reshape(n, num_patches, patch_dim)


class Block(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)).softmax(-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    """A one-block ViT whose class token goes through the norm and the projection head."""

    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Linear(patch_dim, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.fc = nn.Sequential(nn.Linear(embed_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, hidden_dim),
                                nn.GELU(), nn.Linear(hidden_dim, output_dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, patches, patch_drop=0.0):
        n = patches.shape[0]
        x = torch.cat([self.cls_token.expand(n, -1, -1), self.patch_embed(patches)], 1) + self.pos_embed
        if patch_drop > 0:
            keep = int(math.floor(num_patches * (1 - patch_drop)))
            idx = torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(num_patches)[:keep]])
            x = x[:, idx]
        for blk in self.blocks:
            x = blk(x)
        return self.fc(self.norm(x)[:, 0])


def snn(query, supports, support_labels):
    """Soft nearest neighbours of the queries among the prototypes."""
    query, supports = F.normalize(query, dim=1), F.normalize(supports, dim=1)
    return F.softmax(query @ supports.T / tau, dim=1) @ support_labels


def sharpen(p, T):
    sharp = p ** (1.0 / T)
    return sharp / sharp.sum(1, keepdim=True)


def msn_loss(anchor_views, target_views, prototypes, proto_labels, T):
    probs = snn(anchor_views, prototypes, proto_labels)
    with torch.no_grad():
        targets = sharpen(snn(target_views, prototypes, proto_labels), T)
        targets = targets.repeat(num_anchor_views, 1)
    ploss = torch.mean(torch.sum(-targets * torch.log(probs), dim=1))
    avg_probs = probs.mean(0)
    me_max = torch.sum(avg_probs * torch.log(avg_probs)) + math.log(float(len(avg_probs)))
    return ploss, me_max, targets


images = make_images(512)
encoder = Encoder()
target_encoder = encoder
prototypes = nn.Parameter(torch.empty(num_proto, output_dim).uniform_(-(1.0 / output_dim) ** 0.5,
                                                                       (1.0 / output_dim) ** 0.5))
proto_labels = torch.eye(num_proto)
decay = [p for n, p in encoder.named_parameters() if "bias" not in n and p.ndim != 1]
no_decay = [p for n, p in encoder.named_parameters() if "bias" in n or p.ndim == 1]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.04},
                               {"params": no_decay, "weight_decay": 0.0},
                               {"params": [prototypes], "weight_decay": 0.0}], lr=1e-3)
total = max(1, int(1.25 * args.steps))
momentum_schedule = [start_m + (final_m - start_m) * i / total for i in range(total + 1)]

for step in range(args.steps):
    idx = torch.randint(0, images.shape[0], (args.batch_size,))
    batch = images[idx]
    target_view = patchify(augment(batch))
    anchor_views = torch.cat([patchify(augment(batch)) for _ in range(num_anchor_views)], 0)

    optimizer.zero_grad()
    z = encoder(anchor_views, patch_drop=args.patch_drop)
    with torch.no_grad():
        h = target_encoder(target_view)
    ploss, me_max, targets = msn_loss(z, h.detach(), prototypes, proto_labels, sharpen_T)
    loss = ploss + memax_weight * me_max
    loss.backward()
    optimizer.step()

    with torch.no_grad():
        m = momentum_schedule[step]
        for param_q, param_k in zip(encoder.parameters(), target_encoder.parameters()):
            param_k.mul_(m).add_((1.0 - m) * param_q.detach())
    if step % 10 == 0:
        used = len(set(targets.argmax(1).tolist()))
        print(f"step {step} loss {ploss.item():.4f} me-max {me_max.item():.4f} prototypes used {used} "
              f"max target {targets.max(1)[0].mean().item():.3f}")

if args.out:
    torch.save({**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                **{f"target_encoder.{k}": v for k, v in target_encoder.state_dict().items()},
                "prototypes": prototypes.detach().clone()}, args.out)
