"""An inverse compositional spatial transformer network at a tiny size, written after Lin and
Lucey, "Inverse Compositional Spatial Transformer Networks" (CVPR 2017, arXiv:1612.03897;
chenhsuanlin/inverse-compositional-STN, MNIST-pytorch/graph.py, ICSTN.forward): one geometric
predictor is applied recurrently, each time to the input image warped (``F.grid_sample``) by
the current warp parameters, and its output is composed with them; after the loop the image is
warped once more by the final parameters and classified. The warp parameters are never compared
with a target: only the class of the last warped image is, and the whole recurrence is trained
end to end through every warp, on purpose (the method's point is that the predictor learns from
the gradient of the warps it composes). No cut belongs anywhere. Data: four classes of 2-D
shapes made in the script, each seen through a random affine perturbation. ``--out PATH`` saves
every trained tensor."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--warps", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.005)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

SIDE, BATCH, CLASSES = 16, 16, 4

shapes = torch.zeros(CLASSES, 1, SIDE, SIDE)
shapes[0, :, 7:9, 3:13] = 1.0
shapes[1, :, 3:13, 7:9] = 1.0
shapes[2, :, 7:9, 3:13] = 1.0
shapes[2, :, 3:13, 7:9] = 1.0
shapes[3, :, 4:12, 4:12] = 1.0
shapes[3, :, 6:10, 6:10] = 0.0


def to_matrix(p):
    """Warp parameters (N, 6) as 3x3 affine matrices around the identity."""
    rows = (p + torch.tensor([1.0, 0, 0, 0, 1.0, 0])).view(-1, 2, 3)
    bottom = torch.tensor([0.0, 0, 1]).expand(p.shape[0], 1, 3)
    return torch.cat([rows, bottom], 1)


def compose(p, dp):
    """The parameters of the warp ``p`` followed by the update ``dp``."""
    matrix = to_matrix(p) @ to_matrix(dp)
    return (matrix[:, :2] - torch.tensor([[1.0, 0, 0], [0, 1.0, 0]])).flatten(1)


def warp(images, p):
    grid = F.affine_grid(to_matrix(p)[:, :2], images.shape, align_corners=False)
    return F.grid_sample(images, grid, align_corners=False)


def make_batch():
    labels = torch.randint(CLASSES, (BATCH,))
    perturbation = torch.cat([0.15 * torch.randn(BATCH, 2), 0.2 * torch.randn(BATCH, 1),
                              0.15 * torch.randn(BATCH, 2), 0.2 * torch.randn(BATCH, 1)], 1)
    return warp(shapes[labels], perturbation) + 0.05 * torch.randn(BATCH, 1, SIDE, SIDE), labels


class ICSTN(nn.Module):
    def __init__(self):
        super().__init__()
        self.geometric = nn.Sequential(nn.Conv2d(1, 4, 5, stride=2, padding=2), nn.ReLU(),
                                       nn.Flatten(), nn.Linear(4 * 8 * 8, 6))
        self.geometric[-1].weight.data.zero_()
        self.geometric[-1].bias.data.zero_()
        self.classifier = nn.Sequential(nn.Conv2d(1, 6, 3, stride=2, padding=1), nn.ReLU(),
                                        nn.Flatten(), nn.Linear(6 * 8 * 8, CLASSES))

    def forward(self, images):
        p = torch.zeros(images.shape[0], 6)
        for _ in range(args.warps):
            dp = self.geometric(warp(images, p))
            p = compose(p, dp)
        return self.classifier(warp(images, p))


model = ICSTN()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for it in range(args.iters):
    images, labels = make_batch()
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in model.named_parameters()}, args.out)
