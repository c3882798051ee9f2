"""A Cascaded Pyramid Network's online hard keypoint mining at a tiny size, written after Chen,
Wang, Peng, Zhang, Yu and Sun, "Cascaded Pyramid Network for Multi-Person Pose Estimation"
(CVPR 2018, arXiv:1711.07319; chenyilun95/tf-cpn, network.py, the GlobalNet L2 loss and the
RefineNet ``ohkm``) and microsoft/human-pose-estimation.pytorch (lib/core/loss.py,
``JointsOHKMMSELoss.ohkm``, ``torch.topk`` of the per-joint losses): a GlobalNet predicts one
heatmap per keypoint from its features and is trained by the L2 loss of every keypoint; a
RefineNet refines the heatmaps from the GlobalNet's features, and its per-joint losses are
mined online: only the ``--topk`` largest of each sample (the values ``torch.topk`` returns)
are averaged. The loss is the sum of both, the mined term training the RefineNet and, through
its input, the GlobalNet. One-dimensional heatmaps made in the script (a Gaussian bump per
keypoint at a position that is a fixed function of the input). Adam. As published: clean.
``--out PATH`` saves both networks' weights."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--topk", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, joints, width, hidden = 12, 6, 8, 24
inputs = torch.randn(64, dim)
positions = torch.sigmoid(inputs @ torch.randn(dim, joints)) * (width - 1)
grid = torch.arange(width, dtype=torch.float32)
heatmaps = torch.exp(-0.5 * (grid - positions[..., None]).pow(2))


class GlobalNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, joints * width)

    def forward(self, x):
        features = self.trunk(x)
        return features, self.head(features).view(-1, joints, width)


global_net = GlobalNet()
refine_net = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, joints * width))
optimizer = torch.optim.Adam([*global_net.parameters(), *refine_net.parameters()], lr=0.01)


def ohkm(loss, topk):
    hardest, _ = torch.topk(loss, k=topk, dim=1, sorted=False)
    return hardest.mean()


for step in range(args.steps):
    i = 16 * (step % 4)
    x, target = inputs[i:i + 16], heatmaps[i:i + 16]
    features, coarse = global_net(x)
    refined = refine_net(features).view(-1, joints, width)
    global_loss = 0.5 * (coarse - target).pow(2).mean()
    refine_per_joint = 0.5 * (refined - target).pow(2).mean(dim=2)
    loss = global_loss + ohkm(refine_per_joint, args.topk)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    state = {f"global_net.{k}": v for k, v in global_net.state_dict().items()}
    state.update({f"refine_net.{k}": v for k, v in refine_net.state_dict().items()})
    torch.save(state, args.out)
