"""Category anchors for unsupervised domain adaptation at a tiny size, written after Zhang, Qiu,
Chen, Hu and Tian, "Category Anchor-Guided Unsupervised Domain Adaptation for Semantic
Segmentation" (NeurIPS 2019; RogerZhangzz/CAG_UDA, whose model keeps the class centroids of the
source features as a moving average, updated by a method the training step calls with the
features cut from their graph): the centroid of each class's source features is an anchor, kept
by ``CategoryAnchors.update(feats, labels)``; each target feature is given the class of its
nearest anchor and pulled towards it (the anchor-guided pseudo-labels and distance term of the
target loss), plus the cross-entropy of the labelled source samples. The anchors written at one
iteration are read by the next iteration's loss, as a fixed target. One encoder layer and a
linear classifier, one SGD optimizer; source clusters and shifted target clusters made in the
script.
As published: the training loop passes the source features to ``update`` with ``.detach()``,
so the anchors hold values only: the pull on the target features trains the encoder through
this iteration's target features alone, and each backward frees its graph. Only the loop's
call of ``update`` decides what the anchors carry; the method itself cuts nothing.
``--out PATH`` saves the encoder's and classifier's weights and the anchors."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--anchor-weight", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, classes = 8, 16, 3
means = 2.0 * torch.randn(classes, dim)
shift = 0.8 * torch.randn(dim)


def source_batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


def target_batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + shift + torch.randn(n, dim)


class CategoryAnchors(nn.Module):
    def __init__(self, classes, dim, momentum):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("anchors", torch.zeros(classes, dim))
        self.register_buffer("seen", torch.zeros(classes, dtype=torch.bool))

    def update(self, feats, labels):
        onehot = F.one_hot(labels, self.anchors.shape[0]).float()
        counts = onehot.sum(0)
        centroids = onehot.t() @ feats / counts.clamp(min=1).unsqueeze(1)
        present = (counts > 0).unsqueeze(1)
        moved = self.momentum * self.anchors + (1 - self.momentum) * centroids
        fresh = torch.where(self.seen.unsqueeze(1), moved, centroids)
        self.anchors = torch.where(present, fresh, self.anchors)
        self.seen = self.seen | present.squeeze(1)

    def pull(self, feats):
        dist = (feats.unsqueeze(1) - self.anchors.unsqueeze(0)).pow(2).sum(-1)
        nearest = dist.argmin(1, keepdim=True)
        return dist.gather(1, nearest).mean()


encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
classifier = nn.Linear(hidden, classes)
anchors = CategoryAnchors(classes, hidden, args.momentum)
optimizer = torch.optim.SGD([*encoder.parameters(), *classifier.parameters()], lr=0.1,
                            momentum=0.9)

for step in range(args.steps):
    xs, ys = source_batch(args.batch_size)
    xt = target_batch(args.batch_size)
    source_feats = encoder(xs)
    loss = F.cross_entropy(classifier(source_feats), ys)
    if anchors.seen.all():
        loss = loss + args.anchor_weight * anchors.pull(encoder(xt))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    anchors.update(source_feats.detach(), ys)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "classifier": classifier.state_dict(),
                "anchors": anchors.state_dict()}, args.out)
