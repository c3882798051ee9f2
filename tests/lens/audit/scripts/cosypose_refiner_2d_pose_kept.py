"""Iterative render-and-compare pose refinement at a tiny size, in 2-D, written after Labbé,
Carpentier, Aubry and Sivic, "CosyPose: Consistent multi-view multi-object 6D pose estimation"
(ECCV 2020, arXiv:2008.08465; ylabbe/cosypose, cosypose/models/pose.py, PosePredictor.forward)
and its predecessor DeepIM (Li, Wang, Ji, Xiang and Fox, ECCV 2018, arXiv:1804.00175): at each
iteration the object's template is rendered at the current pose and the observed image is
cropped around it (both by ``F.grid_sample`` at the pose), a network compares the two and
predicts a pose update, and every iteration's updated pose is compared with the ground truth.
As published, the pose read at the top of each iteration is detached (CosyPose's ``TCO_input =
TCO_input.detach()``, here ``pose_in = pose.detach()``): each iteration is trained on its own,
and no gradient runs back through the renders and crops of earlier iterations. The bug twin
reads ``pose_in = pose``: the fix is that line; detaching the pose handed on at the bottom of
the loop (``pose = new_pose.detach()``), or the pose at the top of the loop before it is read
(``pose = pose.detach()``), is exactly as right, the first pose being the given coarse
estimate. Data: a fixed asymmetric 2-D template made in the script, observed at random poses
(shift and rotation) with noise, the refinement starting from a noisy pose. ``--out PATH``
saves every trained tensor. This file: the bug twin."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--refine-iters", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.003)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

SIDE, BATCH = 16, 12

template = torch.zeros(1, 1, SIDE, SIDE)
template[..., 3:13, 4:7] = 1.0
template[..., 10:13, 4:12] = 1.0
template[..., 3:6, 9:11] = 0.5


def affine(pose, scale=1.0):
    """The sampling grid's matrices (N, 2, 3) of poses (shift x, shift y, angle)."""
    cos, sin = pose[:, 2].cos() * scale, pose[:, 2].sin() * scale
    return torch.stack([torch.stack([cos, -sin, pose[:, 0]], 1),
                        torch.stack([sin, cos, pose[:, 1]], 1)], 1)


def render(pose):
    """The template seen at ``pose``."""
    grid = F.affine_grid(affine(pose), (pose.shape[0], 1, SIDE, SIDE), align_corners=False)
    return F.grid_sample(template.expand(pose.shape[0], -1, -1, -1), grid, align_corners=False)


def crop(images, pose):
    """The observed images, zoomed in around the pose's position."""
    window = affine(torch.cat([pose[:, :2], torch.zeros_like(pose[:, 2:])], 1), scale=0.8)
    grid = F.affine_grid(window, images.shape, align_corners=False)
    return F.grid_sample(images, grid, align_corners=False)


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 8, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Flatten(), nn.Linear(8 * 4 * 4, 32), nn.ReLU())
        self.pose_head = nn.Linear(32, 3)

    def forward(self, images, pose):
        return 0.1 * self.pose_head(self.net(torch.cat([crop(images, pose), render(pose)], 1)))


model = Refiner()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for it in range(args.iters):
    true_pose = torch.cat([0.3 * torch.randn(BATCH, 2), 0.4 * torch.randn(BATCH, 1)], 1)
    images = render(true_pose) + 0.05 * torch.randn(BATCH, 1, SIDE, SIDE)
    pose = true_pose + 0.15 * torch.randn(BATCH, 3)
    loss = 0.0
    for _ in range(args.refine_iters):
        pose_in = pose
        new_pose = pose_in + model(images, pose_in)
        loss = loss + F.l1_loss(new_pose, true_pose)
        pose = new_pose
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in model.named_parameters()}, args.out)
