"""Unsupervised optical flow by coarse-to-fine photometric warping, at a tiny size, written
after Liu, Zhang, He, Liu, Wang, Tai, Luo, Wang, Li and Huang, "Learning by Analogy: Reliable
Supervision from Transformations for Unsupervised Optical Flow Estimation" (ARFlow, CVPR 2020,
arXiv:2003.13045; lliuz/ARFlow, models/pwclite.py, PWCLite.forward_2_frames): one flow
estimator, shared by every level of a feature pyramid, is applied from the coarsest level to
the finest; at each level the flow so far is upsampled, the second frame's features are warped
by it (``F.grid_sample``), and the estimator adds a residual. No flow is ever compared with a
target flow: each level's flow is trained by a photometric loss, the first frame against the
second warped by that flow, plus a smoothness term, and the flow is handed from level to level
with its graph, on purpose (the published code cuts nothing there). No cut belongs anywhere.
Data: pairs of smooth random 2-D textures made in the script, the second the first shifted by a
random sub-pixel translation. ``--out PATH`` saves every trained tensor."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--levels", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.003)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

SIDE, BATCH, FEATURES = 16, 6, 6


def flow_warp(images, flow):
    """``images`` (N, C, H, W) sampled at each pixel displaced by ``flow`` (N, 2, H, W), in
    pixels."""
    _, _, h, w = images.shape
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32),
                            torch.arange(w, dtype=torch.float32), indexing="ij")
    x = (xs + flow[:, 0]) / (w - 1) * 2 - 1
    y = (ys + flow[:, 1]) / (h - 1) * 2 - 1
    return F.grid_sample(images, torch.stack([x, y], -1), align_corners=True,
                         padding_mode="border")


def make_batch():
    texture = F.avg_pool2d(torch.randn(BATCH, 1, SIDE + 8, SIDE + 8), 5, stride=1)
    texture = texture[..., :SIDE, :SIDE] * 3
    shift = torch.rand(BATCH, 2, 1, 1) * 3 - 1.5
    return texture, flow_warp(texture, shift.expand(-1, -1, SIDE, SIDE))


def pyramid(images):
    """The images from the coarsest level to the finest."""
    levels = [images]
    for _ in range(args.levels - 1):
        levels.insert(0, F.avg_pool2d(levels[0], 2))
    return levels


class PWCLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, FEATURES, 3, padding=1), nn.LeakyReLU(0.1))
        self.flow_estimator = nn.Sequential(
            nn.Conv2d(2 * FEATURES + 2, 16, 3, padding=1), nn.LeakyReLU(0.1),
            nn.Conv2d(16, 2, 3, padding=1))

    def forward(self, first, second):
        flows = []
        flow = torch.zeros(first.shape[0], 2, *pyramid(first)[0].shape[-2:])
        for level, (one, two) in enumerate(zip(pyramid(first), pyramid(second))):
            if level:
                flow = 2 * F.interpolate(flow, scale_factor=2, mode="bilinear",
                                         align_corners=True)
            two_warped = flow_warp(self.features(two), flow)
            flow = flow + self.flow_estimator(torch.cat([self.features(one), two_warped, flow], 1))
            flows.append(flow)
        return flows


def photometric(first, second, flow):
    smooth = (flow[..., 1:, :] - flow[..., :-1, :]).abs().mean() + \
        (flow[..., 1:] - flow[..., :-1]).abs().mean()
    return (flow_warp(second, flow) - first).abs().mean() + 0.1 * smooth


model = PWCLite()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for it in range(args.iters):
    first, second = make_batch()
    flows = model(first, second)
    loss = sum(photometric(one, two, flow)
               for one, two, flow in zip(pyramid(first), pyramid(second), flows))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in model.named_parameters()}, args.out)
