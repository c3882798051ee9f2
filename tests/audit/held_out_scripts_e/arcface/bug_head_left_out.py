"""ArcFace at a tiny size, written after Deng, Guo, Xue and Zafeiriou, "ArcFace: Additive Angular
Margin Loss for Deep Face Recognition" (CVPR 2019, arXiv:1801.07698), with the margin head and the
optimizer of ronghuaiyang/arcface-pytorch (https://github.com/ronghuaiyang/arcface-pytorch,
models/metrics.py ArcMarginProduct and train.py): the logit of the true class is ``s cos(theta +
m)`` between the L2-normalised embedding and class weight, the other logits ``s cos(theta)``, and
one SGD optimizer holds two parameter groups, the embedding network and the margin head. Two phases,
as in the softmax-pretraining recipe for margin losses: the embedding network is first trained under
a plain softmax classifier, which is then dropped; a new ArcFace head is built and trained with the
network. An MLP embedding on identities made in the script (one cluster of vectors each). Injected
bug: the second phase's optimizer is built over the embedding network's parameters only, the ArcFace
head's parameter group forgotten, so the class weights of the margin head keep their initial values
while the network is trained against them."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=8)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--scale", type=float, default=16.0)
parser.add_argument("--margin", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, embed_dim, identities = 16, 8, 6
centers = 2.0 * torch.randn(identities, dim)


def batch(n):
    y = torch.randint(0, identities, (n,))
    return centers[y] + torch.randn(n, dim), y


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s, m, easy_margin=False):
        super().__init__()
        self.s, self.m, self.easy_margin = s, m, easy_margin
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.cos_m, self.sin_m = math.cos(m), math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, x, label):
        cosine = F.linear(F.normalize(x), F.normalize(self.weight))
        sine = (1.0 - cosine.pow(2)).clamp(1e-7, 1).sqrt()
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = F.one_hot(label, cosine.size(1)).float()
        return self.s * (one_hot * phi + (1.0 - one_hot) * cosine)


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, embed_dim))

# phase 1: the embedding network pretrained under a plain softmax classifier
softmax_head = nn.Linear(embed_dim, identities)
pre_optimizer = torch.optim.SGD([*model.parameters(), *softmax_head.parameters()], lr=0.1,
                                momentum=0.9)
for step in range(args.pretrain_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(softmax_head(model(x)), y)
    pre_optimizer.zero_grad()
    loss.backward()
    pre_optimizer.step()
    print(f"pretrain {step} softmax loss {loss.item():.4f}")

# phase 2: a new ArcFace head, trained with the network
metric_fc = ArcMarginProduct(embed_dim, identities, s=args.scale, m=args.margin)
optimizer = torch.optim.SGD([{"params": model.parameters()}],
                            lr=0.05, momentum=0.9, weight_decay=5e-4)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(metric_fc(model(x), y), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} arcface loss {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "metric_fc": metric_fc.state_dict()}, args.out)
