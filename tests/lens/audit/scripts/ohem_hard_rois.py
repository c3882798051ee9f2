"""Online hard example mining of the regions of interest at a tiny size, written after
Shrivastava, Gupta and Girshick, "Training Region-based Object Detectors with Online Hard
Example Mining" (CVPR 2016, arXiv:1604.03540; abhi2610/ohem) and open-mmlab/mmdetection
(mmdet/models/task_modules/samplers/ohem_sampler.py, ``OHEMSampler.hard_mining``: the RoI head's
per-RoI loss computed under ``torch.no_grad()`` and ``loss.topk(num_expected)``): a Fast R-CNN
style head scores every RoI of an image (its class, background included, and a box offset);
the read-only pass ranks the RoIs by their classification plus box loss, ``torch.topk`` picks
the hardest, and the head is trained by the cross-entropy of the selected RoIs and the smooth
L1 loss of their foreground boxes. The values ``torch.topk`` returns are not used; its indices
only select the trained losses. RoI features made in the script (the class and the box a fixed
function of the features, plus noise). SGD with momentum. Clean. ``--out PATH`` saves the
head's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--hard", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, rois = 10, 3, 64
features = torch.randn(4 * rois, dim)
roi_labels = (features @ torch.randn(dim, classes)).argmax(dim=1)
box_targets = torch.tanh(features @ torch.randn(dim, 2)) + 0.05 * torch.randn(4 * rois, 2)


class RoIHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(dim, 32), nn.ReLU())
        self.cls = nn.Linear(32, classes)
        self.box = nn.Linear(32, 2)

    def forward(self, x):
        h = self.shared(x)
        return self.cls(h), self.box(h)


def roi_losses(head, x, labels, boxes):
    scores, deltas = head(x)
    cls_loss = F.cross_entropy(scores, labels, reduction="none")
    box_loss = F.smooth_l1_loss(deltas, boxes, reduction="none").sum(dim=1) * (labels > 0)
    return cls_loss, box_loss


head = RoIHead()
optimizer = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)

for step in range(args.steps):
    i = rois * (step % 4)
    x, labels, boxes = features[i:i + rois], roi_labels[i:i + rois], box_targets[i:i + rois]
    with torch.no_grad():
        cls_all, box_all = roi_losses(head, x, labels, boxes)
        _, hard = torch.topk(cls_all + box_all, args.hard)
    cls_loss, box_loss = roi_losses(head, x[hard], labels[hard], boxes[hard])
    loss = cls_loss.mean() + box_loss.sum() / max(1, int((labels[hard] > 0).sum()))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"head.{k}": v for k, v in head.state_dict().items()}, args.out)
