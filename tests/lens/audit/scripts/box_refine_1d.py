"""Iterative bounding-box refinement at a tiny size, on 1-D signals, written after Zhu, Su, Lu,
Li, Wang and Dai, "Deformable DETR: Deformable Transformers for End-to-End Object Detection"
(ICLR 2021, arXiv:2010.04159; fundamentalvision/Deformable-DETR, models/
deformable_transformer.py, DeformableTransformerDecoder.forward, the iterative bounding box
refinement): a query starts from a reference box predicted from it, and each decoder stage
reads the backbone's features at the current box (``F.grid_sample`` at its centre and both
ends), updates the query, and predicts a new box as an offset of the current one in logit
space; every stage's box is compared with the ground truth. As published, the box handed on to
the next stage is detached (``reference = new_reference.detach()``): each stage's box head is
trained by its own stage's loss alone, through its own sampling, and no gradient runs back
through the boxes of earlier stages (the query itself is carried with its graph). The bug twin
hands on ``reference = new_reference``: the fix is that line. Data: 1-D noisy signals made in
the script, each with one raised segment (its box: centre and width, in [0, 1]). ``--out PATH``
saves every trained tensor. This file: the published script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--stages", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

LENGTH, BATCH, CHANNELS, WIDTH = 32, 16, 8, 16


def make_batch():
    """Noisy 1-D signals, each raised on one segment; the segment as (centre, width)."""
    centre = torch.rand(BATCH) * 0.6 + 0.2
    width = torch.rand(BATCH) * 0.2 + 0.1
    pos = torch.linspace(0, 1, LENGTH)
    inside = ((pos[None] - centre[:, None]).abs() < width[:, None] / 2).float()
    signal = inside + 0.1 * torch.randn(BATCH, LENGTH)
    return signal[:, None], torch.stack([centre, width], 1)


def inverse_sigmoid(x, eps=1e-4):
    x = x.clamp(eps, 1 - eps)
    return torch.log(x / (1 - x))


def sample_at(features, box):
    """The features (N, C, L) read at the box's left end, centre and right end."""
    centre, width = box[:, 0:1], box[:, 1:2]
    points = torch.cat([centre - width / 2, centre, centre + width / 2], 1)
    grid = torch.stack([points * 2 - 1, torch.zeros_like(points)], -1)[:, None]
    return F.grid_sample(features[:, :, None], grid, align_corners=True).flatten(1)


class BoxDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv1d(1, CHANNELS, 5, padding=2), nn.ReLU(),
                                      nn.Conv1d(CHANNELS, CHANNELS, 5, padding=2))
        self.query = nn.Parameter(0.1 * torch.randn(WIDTH))
        self.reference_points = nn.Linear(WIDTH, 2)
        self.stages = nn.ModuleList(nn.Linear(WIDTH + 3 * CHANNELS, WIDTH)
                                    for _ in range(args.stages))
        self.bbox_embed = nn.ModuleList(nn.Linear(WIDTH, 2) for _ in range(args.stages))

    def forward(self, signal):
        features = self.backbone(signal)
        query = self.query.expand(signal.shape[0], -1)
        reference = self.reference_points(query).sigmoid()
        boxes = []
        for stage, bbox_embed in zip(self.stages, self.bbox_embed):
            query = torch.tanh(stage(torch.cat([query, sample_at(features, reference)], 1)))
            new_reference = (inverse_sigmoid(reference) + bbox_embed(query)).sigmoid()
            reference = new_reference.detach()
            boxes.append(new_reference)
        return boxes


model = BoxDecoder()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for it in range(args.iters):
    signal, target = make_batch()
    boxes = model(signal)
    loss = sum(F.l1_loss(box, target) for box in boxes)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in model.named_parameters()}, args.out)
