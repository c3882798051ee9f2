"""Image-based joint-embedding predictive architecture (I-JEPA) at a tiny size, written after
Assran, Duval, Misra, Bojanowski, Vincent, Rabbat, LeCun and Ballas, "Self-Supervised Learning from
Images with a Joint-Embedding Predictive Architecture" (CVPR 2023, arXiv:2301.08243), section 3,
with facebookresearch/ijepa (https://github.com/facebookresearch/ijepa, src/train.py main and its
train_step: target_encoder = copy.deepcopy(encoder) with requires_grad = False on its parameters;
forward_target, which runs the target encoder under torch.no_grad(), layer-norms its output over the
feature dimension and keeps the target blocks; forward_context, the context encoder on the context
patches and the predictor from them to the target positions; F.smooth_l1_loss; loss.backward(),
optimizer.step(), then optimizer.zero_grad(); the momentum update of the target encoder under
torch.no_grad() with m from a linear schedule ema[0] -> ema[1]; src/helper.py init_opt: AdamW over
four parameter groups, the encoder's and the predictor's weights with weight decay and their biases
and 1-d parameters without, a warmup-cosine learning rate and a cosine weight-decay schedule;
src/models/vision_transformer.py VisionTransformer and VisionTransformerPredictor: fixed sin-cos
positions, a learnt mask token, predictor_embed, predictor_norm and predictor_proj). A ViT of one
block on 8x8 images cut into 2x2 patches; per batch one context block and two 2x2 target blocks
removed from it. Images made in the script from random oriented gratings and a blob. Injected bug:
the optimizer.zero_grad() that ijepa's train_step calls after optimizer.step() and the gradient
statistics is dropped, so the gradients of the encoder and the predictor are never cleared: the
first update is the clean one, and every later AdamW step reads the sum of the gradients of all the
batches so far (and the momentum update carries the wrongly trained encoder into the target
encoder)."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--warmup", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--start-lr", type=float, default=2e-4)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--final-lr", type=float, default=1e-6)
parser.add_argument("--wd", type=float, default=0.04)
parser.add_argument("--final-wd", type=float, default=0.4)
parser.add_argument("--ema", type=float, nargs=2, default=[0.996, 1.0])
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, patch, embed_dim, pred_dim, heads = 8, 2, 32, 16, 2
grid = size // patch
coords = torch.linspace(-1, 1, size)
yy, xx = torch.meshgrid(coords, coords, indexing="ij")


def make_images(n):
    angle, freq = torch.rand(n, 1, 1) * math.pi, 2 + 4 * torch.rand(n, 1, 1)
    grating = torch.sin(freq * (xx * angle.cos() + yy * angle.sin()))
    centre = 2 * torch.rand(n, 2, 1, 1) - 1
    blob = torch.exp(-((xx - centre[:, 0]) ** 2 + (yy - centre[:, 1]) ** 2) / 0.1)
    return (grating + 2 * blob + 0.1 * torch.randn(n, size, size)).unsqueeze(1)


def sincos_positions(dim):
    pos = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij"), -1)
    omega = 1.0 / 10000 ** (torch.arange(dim // 4) / (dim // 4))
    angles = pos.reshape(-1, 2, 1).float() * omega
    return torch.cat([angles[:, 0].sin(), angles[:, 0].cos(), angles[:, 1].sin(),
                      angles[:, 1].cos()], -1).unsqueeze(0)


def block(dim):
    return nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True,
                                      norm_first=True)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(1, embed_dim, patch, stride=patch)
        self.register_buffer("pos_embed", sincos_positions(embed_dim))
        self.blocks = nn.ModuleList([block(embed_dim)])
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x, keep=None):
        x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
        if keep is not None:
            x = x[:, keep]
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


class Predictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.predictor_embed = nn.Linear(embed_dim, pred_dim)
        self.mask_token = nn.Parameter(0.02 * torch.randn(1, 1, pred_dim))
        self.register_buffer("pos_embed", sincos_positions(pred_dim))
        self.blocks = nn.ModuleList([block(pred_dim)])
        self.predictor_norm = nn.LayerNorm(pred_dim)
        self.predictor_proj = nn.Linear(pred_dim, embed_dim)

    def forward(self, z, context, target):
        x = self.predictor_embed(z) + self.pos_embed[:, context]
        tokens = (self.mask_token + self.pos_embed[:, target]).expand(len(z), -1, -1)
        x = torch.cat([x, tokens], 1)
        for blk in self.blocks:
            x = blk(x)
        return self.predictor_proj(self.predictor_norm(x[:, len(context):]))


def sample_masks():
    """Two 2x2 target blocks, and a context block of at least 3x3 patches without them."""
    targets = []
    for _ in range(2):
        r, c = torch.randint(0, grid - 1, (2,)).tolist()
        targets.append(torch.tensor([(r + i) * grid + c + j for i in range(2) for j in range(2)]))
    h, w = torch.randint(3, grid + 1, (2,)).tolist()
    r, c = torch.randint(0, grid - h + 1, (1,)).item(), torch.randint(0, grid - w + 1, (1,)).item()
    context = [(r + i) * grid + c + j for i in range(h) for j in range(w)]
    removed = set(torch.cat(targets).tolist())
    context = torch.tensor([p for p in context if p not in removed])
    return context, targets


images = make_images(512)
encoder, predictor = Encoder(), Predictor()
target_encoder = copy.deepcopy(encoder)
for p in target_encoder.parameters():
    p.requires_grad = False


def decayed(module):
    return [p for n, p in module.named_parameters() if "bias" not in n and p.dim() != 1]


def not_decayed(module):
    return [p for n, p in module.named_parameters() if "bias" in n or p.dim() == 1]


param_groups = [
    {"params": decayed(encoder)},
    {"params": decayed(predictor)},
    {"params": not_decayed(encoder), "WD_exclude": True, "weight_decay": 0},
    {"params": not_decayed(predictor), "WD_exclude": True, "weight_decay": 0},
]
optimizer = torch.optim.AdamW(param_groups)

for step in range(args.steps):
    if step < args.warmup:
        lr = args.start_lr + (args.lr - args.start_lr) * (step + 1) / args.warmup
    else:
        progress = (step - args.warmup) / max(1, args.steps - args.warmup)
        lr = args.final_lr + (args.lr - args.final_lr) * 0.5 * (1 + math.cos(math.pi * progress))
    cosine = 0.5 * (1 + math.cos(math.pi * step / args.steps))
    wd = args.final_wd + (args.wd - args.final_wd) * cosine
    for group in optimizer.param_groups:
        group["lr"] = lr
        if not group.get("WD_exclude", False):
            group["weight_decay"] = wd
    imgs = images[torch.randint(0, len(images), (args.batch_size,))]
    context, targets = sample_masks()
    with torch.no_grad():
        h = target_encoder(imgs)
        h = F.layer_norm(h, (h.size(-1),))
        h = torch.cat([h[:, t] for t in targets])
    z = encoder(imgs, context)
    z = torch.cat([predictor(z, context, t) for t in targets])
    loss = F.smooth_l1_loss(z, h)
    loss.backward()
    optimizer.step()
    grad_norm = torch.cat([p.grad.flatten() for p in encoder.parameters()]).norm().item()
    with torch.no_grad():
        m = args.ema[0] + (args.ema[1] - args.ema[0]) * step / args.steps
        for param_q, param_k in zip(encoder.parameters(), target_encoder.parameters()):
            param_k.mul_(m).add_((1.0 - m) * param_q.detach())
    print(f"step {step} loss {loss.item():.4f} lr {lr:.2e} wd {wd:.3f} grad {grad_norm:.3f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "predictor": predictor.state_dict(),
                "target_encoder": target_encoder.state_dict()}, args.out)
