"""Maximum classifier discrepancy for unsupervised domain adaptation at a tiny size, written after
Saito, Watanabe, Ushiku and Harada, "Maximum Classifier Discrepancy for Unsupervised Domain
Adaptation" (CVPR 2018, arXiv:1712.02560), section 3.2 and figure 3: a feature generator G and two
classifiers F1 and F2 trained in three steps per batch, (A) G, F1 and F2 on the labelled source
batch, (B) F1 and F2, G fixed, to classify the source and to maximise their discrepancy, the mean
absolute difference of their softmax outputs, on the target batch, (C) G, F1 and F2 fixed, to
minimise that discrepancy, repeated num_k times. With mil-tokyo/MCD_DA
(https://github.com/mil-tokyo/MCD_DA, classification/solver.py: Solver.set_optimizer, one Adam
per network, opt_g over G, opt_c1 over C1 and opt_c2 over C2, weight_decay 0.0005; reset_grad,
which zeroes the three; discrepancy, torch.mean(torch.abs(softmax(out1) - softmax(out2)));
Solver.train: step A, reset_grad, the source cross-entropy of both classifiers, backward and the
three optimizers stepped, reset_grad; step B, the source loss minus the discrepancy on the target
batch, backward through G as well, only opt_c1 and opt_c2 stepped, then reset_grad so G's
gradient of step B is thrown away; step C, num_k times the discrepancy's backward, opt_g.step()
and reset_grad). A four-class source made in the script (Gaussian clusters) and a target domain
made from it by a rotation and a shift, its labels unused in training.
Bug: the second classifier's Adam is built over C1.parameters(), a copy-paste slip (set_optimizer
builds opt_c2 over self.C2.parameters()), so C2 is in no optimizer: it keeps its initial weights
while its .grad gathers every backward, C1 is stepped twice per step A and per step B by two Adams,
and the discrepancy the generator is trained to minimise is measured against a fixed random
classifier."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--num-k", type=int, default=4)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, feat_dim, n_classes = 8, 16, 4
centres = 2.5 * torch.randn(n_classes, in_dim)
source_y = torch.randint(0, n_classes, (512,))
source_x = centres[source_y] + torch.randn(512, in_dim)
target_y = torch.randint(0, n_classes, (512,))
angle = math.pi / 6
rotation = torch.eye(in_dim)
rotation[:2, :2] = torch.tensor([[math.cos(angle), -math.sin(angle)],
                                 [math.sin(angle), math.cos(angle)]])
target_x = (centres[target_y] + torch.randn(512, in_dim)) @ rotation.t() + 0.5


def make_classifier():
    return nn.Sequential(nn.Linear(feat_dim, 32), nn.ReLU(), nn.Linear(32, n_classes))


G = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, feat_dim), nn.ReLU())
C1 = make_classifier()
C2 = make_classifier()
opt_g = torch.optim.Adam(G.parameters(), lr=args.lr, weight_decay=0.0005)
opt_c1 = torch.optim.Adam(C1.parameters(), lr=args.lr, weight_decay=0.0005)
opt_c2 = torch.optim.Adam(C1.parameters(), lr=args.lr, weight_decay=0.0005)


def reset_grad():
    opt_g.zero_grad()
    opt_c1.zero_grad()
    opt_c2.zero_grad()


def discrepancy(out1, out2):
    return torch.mean(torch.abs(F.softmax(out1, dim=1) - F.softmax(out2, dim=1)))


for step in range(args.steps):
    img_s_idx = torch.randint(0, len(source_x), (args.batch_size,))
    img_s, label_s = source_x[img_s_idx], source_y[img_s_idx]
    img_t = target_x[torch.randint(0, len(target_x), (args.batch_size,))]

    # step A: G, C1 and C2 on the labelled source batch
    reset_grad()
    feat_s = G(img_s)
    loss_s = F.cross_entropy(C1(feat_s), label_s) + F.cross_entropy(C2(feat_s), label_s)
    loss_s.backward()
    opt_g.step()
    opt_c1.step()
    opt_c2.step()
    reset_grad()

    # step B: the classifiers alone, to classify the source and disagree on the target
    feat_s = G(img_s)
    feat_t = G(img_t)
    loss_s = F.cross_entropy(C1(feat_s), label_s) + F.cross_entropy(C2(feat_s), label_s)
    loss_dis = discrepancy(C1(feat_t), C2(feat_t))
    loss = loss_s - loss_dis
    loss.backward()
    opt_c1.step()
    opt_c2.step()
    reset_grad()

    # step C: the generator alone, num_k times, to make the classifiers agree on the target
    for i in range(args.num_k):
        feat_t = G(img_t)
        loss_dis = discrepancy(C1(feat_t), C2(feat_t))
        loss_dis.backward()
        opt_g.step()
        reset_grad()

    if step % 5 == 0:
        with torch.no_grad():
            feat = G(target_x)
            acc = ((C1(feat) + C2(feat)).argmax(1) == target_y).float().mean().item()
        print(f"step {step} source {loss_s.item():.4f} discrepancy {loss_dis.item():.4f} "
              f"target acc {acc:.3f}")

if args.out:
    torch.save({**{f"G.{k}": v for k, v in G.state_dict().items()},
                **{f"C1.{k}": v for k, v in C1.state_dict().items()},
                **{f"C2.{k}": v for k, v in C2.state_dict().items()}}, args.out)
