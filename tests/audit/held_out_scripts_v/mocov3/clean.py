"""MoCo v3 self-supervised pre-training of a tiny MLP encoder on synthetic two-view data, written
after Chen, Xie and He, "An Empirical Study of Training Self-Supervised Vision Transformers"
(ICCV 2021, arXiv:2104.02057): two augmented views x1, x2 of each sample go through a base
encoder (backbone plus projection MLP) followed by a prediction MLP, giving the queries q1, q2,
and through a momentum encoder (backbone plus projection MLP, no predictor), giving the keys k1,
k2, which are targets without gradient; the keys of the other samples in the batch are the
negatives (no memory queue), the InfoNCE loss of q against k is scaled by 2 * tau and made
symmetric, ctr(q1, k2) + ctr(q2, k1), and the momentum encoder follows the base encoder as an
exponential moving average, theta_k <- m * theta_k + (1 - m) * theta_q, with m raised from
0.99 to 1 on a half-cosine schedule. With the authors' code, facebookresearch/moco-v3
(https://github.com/facebookresearch/moco-v3, moco/builder.py MoCo and MoCo_ViT: __init__
copies the base encoder's parameters into the momentum encoder and sets their requires_grad to
False; _build_mlp stacks bias-free Linear layers with BatchNorm1d and ReLU and a final
BatchNorm1d without affine parameters; MoCo_ViT builds a 3-layer projector for both encoders and
a 2-layer predictor on the query side only; _update_momentum_encoder, under torch.no_grad(),
blends the base encoder's parameters into the momentum encoder's; forward computes q1 and q2
through predictor(base_encoder(x)), then under torch.no_grad() updates the momentum encoder and
computes k1 and k2; contrastive_loss l2-normalises q and k, takes q k^T / T as logits with the
diagonal as labels and returns the cross-entropy times 2 * T; main_moco.py train builds the
optimizer over model.parameters(), so over the base encoder and the predictor since the
momentum encoder does not require grad, sets moco_m by adjust_moco_momentum each iteration and
runs optimizer.zero_grad(), loss.backward(), optimizer.step()), whose steps this script
follows, with tau = 0.2 and AdamW with weight decay 0.1 as in its ViT recipe. The data are noisy
points around eight centres in 16 dimensions; a view adds Gaussian noise and randomly rescales
the coordinates, and the encoder's backbone is a small MLP standing in for the ViT.
As published: clean."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--moco-m", type=float, default=0.99, help="base momentum of the key encoder")
parser.add_argument("--moco-t", type=float, default=0.2, help="softmax temperature tau")
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--weight-decay", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the encoders and the predictor")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden, dim, mlp_dim = 16, 64, 32, 64
centres = 2.0 * torch.randn(8, in_dim)
n_samples = 1024
data = centres[torch.randint(0, 8, (n_samples,))] + 0.5 * torch.randn(n_samples, in_dim)


def augment(x):
    """A random view: per-coordinate rescaling and additive Gaussian noise."""
    scale = 1.0 + 0.2 * torch.randn_like(x)
    return x * scale + 0.3 * torch.randn_like(x)


def build_mlp(num_layers, input_dim, mlp_dim, output_dim, last_bn=True):
    layers = []
    for layer in range(num_layers):
        dim1 = input_dim if layer == 0 else mlp_dim
        dim2 = output_dim if layer == num_layers - 1 else mlp_dim
        layers.append(nn.Linear(dim1, dim2, bias=False))
        if layer < num_layers - 1:
            layers += [nn.BatchNorm1d(dim2), nn.ReLU()]
        elif last_bn:
            layers.append(nn.BatchNorm1d(dim2, affine=False))
    return nn.Sequential(*layers)


backbone = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
base_encoder = nn.Sequential(backbone, build_mlp(3, hidden, mlp_dim, dim))
momentum_encoder = copy.deepcopy(base_encoder)
for param_m in momentum_encoder.parameters():
    param_m.requires_grad = False  # the key encoder is not updated by gradient
predictor = build_mlp(2, dim, mlp_dim, dim)


def update_momentum_encoder(m):
    with torch.no_grad():
        for param_b, param_m in zip(base_encoder.parameters(), momentum_encoder.parameters()):
            param_m.mul_(m).add_(param_b, alpha=1.0 - m)


def contrastive_loss(q, k):
    q, k = F.normalize(q, dim=1), F.normalize(k, dim=1)
    logits = q @ k.t() / args.moco_t
    labels = torch.arange(logits.shape[0])
    return F.cross_entropy(logits, labels) * (2 * args.moco_t)


optimizer = torch.optim.AdamW(list(base_encoder.parameters()) + list(predictor.parameters()),
                              lr=args.lr, weight_decay=args.weight_decay)
for step in range(args.steps):
    moco_m = 1.0 - 0.5 * (1.0 + math.cos(math.pi * step / args.steps)) * (1.0 - args.moco_m)
    x = data[torch.randint(0, n_samples, (args.batch_size,))]
    x1, x2 = augment(x), augment(x)
    q1 = predictor(base_encoder(x1))
    q2 = predictor(base_encoder(x2))
    with torch.no_grad():
        update_momentum_encoder(moco_m)
        k1 = momentum_encoder(x1)
        k2 = momentum_encoder(x2)
    loss = contrastive_loss(q1, k2) + contrastive_loss(q2, k1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f} m {moco_m:.4f}")

if args.out:
    torch.save({"base_encoder": base_encoder.state_dict(),
                "momentum_encoder": momentum_encoder.state_dict(),
                "predictor": predictor.state_dict()}, args.out)
