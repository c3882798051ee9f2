"""An auto-decoder with per-shape latent codes at a tiny size, written after Park, Florence,
Straub, Newcombe and Lovegrove, "DeepSDF: Learning Continuous Signed Distance Functions for
Shape Representation" (CVPR 2019, arXiv:1901.05103; facebookresearch/DeepSDF): no encoder, one
latent code per training shape, trained jointly with the decoder by one Adam with a learning
rate per group; the decoder maps a code and a point to the point's clamped signed distance, and
each code is held inside a ball of radius ``--code-bound`` (DeepSDF's ``CodeBound``, which its
``nn.Embedding(max_norm=...)`` applies in place where the codes are looked up). Here the codes
are a plain list of tensors that require grad, renormalised at the top of every step before
they are read. As published: each code is scaled in place (``codes[i].data.mul_``), so the
optimizer built over the list keeps training the codes the decoder reads. Data: spheres of
random centres and radii, their signed distances sampled in the script. ``--out PATH`` saves
the decoder's weights and the codes."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--shapes", type=int, default=6)
parser.add_argument("--latent", type=int, default=8)
parser.add_argument("--points", type=int, default=64, help="samples per shape and step")
parser.add_argument("--code-bound", type=float, default=1.0)
parser.add_argument("--clamp", type=float, default=0.1, help="DeepSDF's clamping distance")
parser.add_argument("--code-reg", type=float, default=1e-4)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--code-lr", type=float, default=2e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

centres = 0.4 * (2 * torch.rand(args.shapes, 3) - 1)
radii = 0.2 + 0.3 * torch.rand(args.shapes)


def samples(i, n):
    """``n`` points in the cube and their signed distances to shape ``i``, clamped."""
    points = 2 * torch.rand(n, 3) - 1
    sdf = (points - centres[i]).norm(dim=1, keepdim=True) - radii[i]
    return points, sdf.clamp(-args.clamp, args.clamp)


decoder = nn.Sequential(nn.Linear(args.latent + 3, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                        nn.Linear(32, 1), nn.Tanh())
codes = [(torch.randn(args.latent) / args.latent ** 0.5).requires_grad_()
         for _ in range(args.shapes)]
optimizer = torch.optim.Adam([{"params": decoder.parameters(), "lr": args.lr},
                              {"params": codes, "lr": args.code_lr}])

for step in range(args.steps):
    # the code bound, applied where the codes are looked up
    for i in range(args.shapes):
        scale = (args.code_bound / codes[i].detach().norm()).clamp(max=1.0)
        codes[i].data.mul_(scale)
    loss = 0.0
    for i in range(args.shapes):
        points, sdf = samples(i, args.points)
        inputs = torch.cat([codes[i].expand(args.points, -1), points], dim=1)
        loss = loss + F.l1_loss(decoder(inputs).clamp(-args.clamp, args.clamp), sdf)
    loss = loss / args.shapes + args.code_reg * sum(code.pow(2).sum() for code in codes)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"decoder": decoder.state_dict(), "codes": [code.detach() for code in codes]},
               args.out)
