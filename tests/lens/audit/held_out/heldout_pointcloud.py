"""3D vision: a point cloud autoencoder for geometry compression, with a straight-through
rounding of its latent code.

The encoder is PointNet's shared per-point MLP and max pool (yanx27/Pointnet_Pointnet2_pytorch
models/pointnet_utils.py@d65f07fda1a35985349421208b580548fd790292, ``PointNetEncoder`` without
its STN), the quantizer CompressAI's straight-through estimator (InterDigitalInc/CompressAI
compressai/ops/ops.py@4fb04564b4227a33075da70d959426c3e80dfa0a, ``quantize_ste``), the loss a
Chamfer distance plus a rate proxy. The text is ours, at tiny sizes.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn

SOURCE = ("InterDigitalInc/CompressAI compressai/ops/ops.py@4fb04564b4227a33075da70d959426c3e80dfa0a"
          " (quantize_ste) with yanx27/Pointnet_Pointnet2_pytorch models/pointnet_utils.py@"
          "d65f07fda1a35985349421208b580548fd790292")
CONFIRMS = ("https://github.com/InterDigitalInc/CompressAI/blob/4fb04564b4227a33075da70d959426c3e8"
            "0dfa0a/compressai/ops/ops.py")


class PointNetEncoder(nn.Module):
    """Shared per-point MLP (1x1 convolutions), then a max over the points."""

    def __init__(self, latent: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, latent, 1))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.mlp(points.transpose(1, 2)).max(dim=2).values


# The bug: the straight-through line lost its .detach(): y + (round(y) - y) is round(y) in the
# forward and its derivative 1 - 1 + 0 cancels to exactly zero, so the encoder never trains
# (truth "dead"). The twin is CompressAI's quantize_ste.
def pointcloud_ste(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    n_points, latent = 12, 6
    encoder = PointNetEncoder(latent)
    decoder = nn.Sequential(nn.Linear(latent, 24), nn.ReLU(), nn.Linear(24, 3 * n_points))
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-4)

    def step() -> torch.Tensor:
        points = torch.rand(2, n_points, 3, generator=gen)
        y = encoder(points) * 4.0
        if bug:
            y_hat = y + (torch.round(y) - y)
        else:
            y_hat = y + (torch.round(y) - y).detach()
        recon = decoder(y_hat).view(2, n_points, 3)
        dist = torch.cdist(recon, points)
        chamfer = dist.min(dim=2).values.mean() + dist.min(dim=1).values.mean()
        rate = torch.log2(1.0 + y_hat.abs()).mean()
        return chamfer + 0.01 * rate

    return RealCase("pointcloud_ste_no_detach" if bug else "pointcloud_ste", SOURCE, CONFIRMS,
                    "dead" if bug else "correct", step, optimizer,
                    {"encoder": encoder, "decoder": decoder})


CASES = {"pointcloud_ste": pointcloud_ste,
         "pointcloud_ste_no_detach": lambda seed: pointcloud_ste(seed, bug=True)}
TWINS = {"pointcloud_ste_no_detach": "pointcloud_ste"}
FIELD = "3D vision (point clouds)"
