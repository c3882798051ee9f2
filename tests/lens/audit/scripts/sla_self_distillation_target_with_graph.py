"""Self-supervised label augmentation with self-distillation (SLA+SD) at a tiny size, written
after Lee, Hwang and Shin, "Self-supervised Label Augmentation via Input Transformations" (ICML
2020, arXiv:1910.05872; hankook/SLA, trainers.py, its create_sla_sd_trainer): every image is
rotated four ways and a joint classifier predicts (class, rotation) pairs; the joint logits of
the four copies, each read at its own rotation, are averaged into an aggregated prediction,
whose softened distribution is the soft target of a single classifier that sees the unrotated
image. Each iteration trains the joint and single classifiers on the labels as predictions (one
backward that keeps the graph), then the distillation into the single classifier (a second
backward, through the shared trunk), then one SGD step. Tiny images made in the script, an MLP
trunk with two linear heads.
Injected bug: the soft target is made from the aggregated logits without ``.detach()``: the
distillation also trains the joint classifier towards the single one. Fix it at the target.
``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--temperature", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

side, classes, rotations = 6, 3, 4
templates = torch.randn(classes, 1, side, side)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return templates[y] + 0.5 * torch.randn(n, 1, side, side), y


class JointAndSingle(nn.Module):
    """A shared trunk, a joint head over (class, rotation) pairs (index ``class * 4 + k``) and
    a single head over the classes."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(side * side, 48), nn.ReLU())
        self.joint = nn.Linear(48, classes * rotations)
        self.single = nn.Linear(48, classes)

    def forward(self, x):
        h = self.trunk(x)
        return self.joint(h), self.single(h)


model = JointAndSingle()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
T = args.temperature

for step in range(args.steps):
    x, y = batch(args.batch_size)
    n = x.shape[0]
    x_aug = torch.cat([torch.rot90(x, k, dims=(2, 3)) for k in range(rotations)])
    joint_labels = torch.cat([y * rotations + k for k in range(rotations)])
    joint_logits, single_logits = model(x_aug)
    single_logits = single_logits[:n]
    joint_loss = F.cross_entropy(joint_logits, joint_labels)
    single_loss = F.cross_entropy(single_logits, y)
    optimizer.zero_grad()
    (joint_loss + single_loss).backward(retain_graph=True)
    per_rotation = joint_logits.view(rotations, n, classes, rotations)
    agg_logits = sum(per_rotation[k, :, :, k] for k in range(rotations)) / rotations
    soft_target = F.softmax(agg_logits / T, dim=1)
    distill = F.kl_div(F.log_softmax(single_logits / T, dim=1), soft_target,
                       reduction="batchmean") * T * T
    distill.backward()
    optimizer.step()
    print(f"step {step} joint {joint_loss.item():.4f} distill {distill.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
