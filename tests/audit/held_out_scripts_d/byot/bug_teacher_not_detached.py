"""Self-distillation at a tiny size, written after Zhang, Song, Gao, Chen, Bao and Ma, "Be Your
Own Teacher: Improve the Performance of Convolutional Neural Networks via Self Distillation"
(ICCV 2019), Section 3: a network cut into sections, each followed by a bottleneck and a shallow
classifier; the deepest classifier is the teacher of the shallow ones. Each shallow classifier is
trained on ``(1 - alpha) CE(q_i, y) + alpha T^2 KL(q_C^T || q_i^T)`` plus the hint term
``lambda ||F_i - F_C||^2`` towards the deepest section's features, the teacher's softened
prediction and features serving as fixed targets; the deepest classifier is trained on the labels.
Three sections of an MLP on vectors made in the script. Injected bug: the deepest classifier's
logits are used as the soft target without ``.detach()`` (the features keep theirs), so each
shallow classifier's distillation term also trains the deepest classifier and the sections under it
towards the shallow predictions."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--temperature", type=float, default=3.0)
parser.add_argument("--hint-weight", type=float, default=0.03)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width, feat, classes = 12, 24, 8, 5
means = 1.3 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class SelfDistilledNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(dim, width), nn.ReLU()),
                                     nn.Sequential(nn.Linear(width, width), nn.ReLU()),
                                     nn.Sequential(nn.Linear(width, width), nn.ReLU())])
        self.bottlenecks = nn.ModuleList([nn.Linear(width, feat) for _ in range(3)])
        self.heads = nn.ModuleList([nn.Linear(feat, classes) for _ in range(3)])

    def forward(self, x):
        features, logits = [], []
        for block, bottleneck, head in zip(self.blocks, self.bottlenecks, self.heads):
            x = block(x)
            f = F.relu(bottleneck(x))
            features.append(f)
            logits.append(head(f))
        return features, logits


model = SelfDistilledNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
T = args.temperature
for step in range(args.steps):
    x, y = batch(args.batch_size)
    features, logits = model(x)
    teacher_logits, teacher_features = logits[-1], features[-1].detach()
    loss = F.cross_entropy(logits[-1], y)
    for f, z in zip(features[:-1], logits[:-1]):
        kd = F.kl_div(F.log_softmax(z / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                      reduction="batchmean") * T * T
        hint = (f - teacher_features).pow(2).sum(1).mean()
        loss = loss + (1 - args.alpha) * F.cross_entropy(z, y) + args.alpha * kd
        loss = loss + args.hint_weight * hint
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
