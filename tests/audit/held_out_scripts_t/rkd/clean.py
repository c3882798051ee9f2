"""Relational knowledge distillation (RKD) of a metric-learning embedding network, written after
Park, Kim, Lu and Cho, "Relational Knowledge Distillation" (CVPR 2019, arXiv:1904.05068): the
student is trained to reproduce the relations among the teacher's embeddings of a batch rather
than the embeddings themselves, through a distance-wise loss, the Huber (smooth L1) loss between
the pairwise Euclidean distances of the student's and of the teacher's embeddings, each divided
by its mean over the distinct pairs, and an angle-wise loss, the Huber loss between the cosines
of the angles formed by every triplet of embeddings, loss = lambda_D * L_dist + lambda_A *
L_angle with lambda_D = 1 and lambda_A = 2 as in the paper's metric-learning experiments. Two
phases: the teacher is trained first with the triplet loss and then frozen, then the smaller
student is distilled from it. With the authors' code, lenscloth/RKD
(https://github.com/lenscloth/RKD, metric/loss.py: RkdDistance.forward computes the teacher's
pdist and its normalisation by the mean of the positive distances under torch.no_grad() and the
student's with gradient, then F.smooth_l1_loss; RKdAngle.forward forms the normalised
difference vectors and their bmm of the teacher under torch.no_grad() and of the student with
gradient, then F.smooth_l1_loss; L2Triplet for the teacher's training in run.py; metric/utils.py
pdist, the clamped Euclidean distance matrix with a zero diagonal; run_distill.py: the teacher
loaded from its checkpoint and put in eval mode, its embeddings taken under torch.no_grad(),
optim.Adam(student.parameters(), weight_decay=1e-5), and per iteration loss = dist_ratio *
dist_criterion(e, t_e) + angle_ratio * angle_criterion(e, t_e), optimizer.zero_grad(),
loss.backward(), optimizer.step()), whose steps this script follows; the embeddings are
L2-normalised as LinearEmbedding does with normalize true. Here the data are points of ten
Gaussian classes in 12 dimensions pushed through a fixed random nonlinearity, the teacher is an
MLP with 64 hidden units and the student one with 16, and the triplets are sampled at random
(one positive and one negative per anchor) in place of the distance-weighted sampler.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=80)
parser.add_argument("--distill-steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=40)
parser.add_argument("--dist-ratio", type=float, default=1.0)
parser.add_argument("--angle-ratio", type=float, default=2.0)
parser.add_argument("--triplet-margin", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the teacher and the student")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, in_dim, n_points = 10, 12, 600
centres = 2.0 * torch.randn(n_classes, in_dim)
labels_all = torch.randint(0, n_classes, (n_points,))
mixing = torch.randn(in_dim, in_dim) / in_dim ** 0.5
inputs_all = torch.tanh((centres[labels_all] + torch.randn(n_points, in_dim)) @ mixing)


class Embedding(nn.Module):
    def __init__(self, hidden, embedding_size):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden), nn.ReLU())
        self.linear = nn.Linear(hidden, embedding_size)

    def forward(self, x):
        return F.normalize(self.linear(self.body(x)), dim=1)


def pdist(e, eps=1e-12):
    """Euclidean distance matrix of the rows of e, with a zero diagonal."""
    e_square = e.pow(2).sum(1)
    squared = (e_square.unsqueeze(1) + e_square.unsqueeze(0) - 2 * e @ e.t()).clamp(min=eps)
    return squared.sqrt() * (1 - torch.eye(len(e)))


def rkd_distance_loss(student, teacher):
    with torch.no_grad():
        t_d = pdist(teacher)
        t_d = t_d / t_d[t_d > 0].mean()
    d = pdist(student)
    d = d / d[d > 0].mean()
    return F.smooth_l1_loss(d, t_d)


def rkd_angle_loss(student, teacher):
    with torch.no_grad():
        td = F.normalize(teacher.unsqueeze(0) - teacher.unsqueeze(1), p=2, dim=2)
        t_angle = torch.bmm(td, td.transpose(1, 2)).view(-1)
    sd = F.normalize(student.unsqueeze(0) - student.unsqueeze(1), p=2, dim=2)
    s_angle = torch.bmm(sd, sd.transpose(1, 2)).view(-1)
    return F.smooth_l1_loss(s_angle, t_angle)


def sample_batch():
    idx = torch.randint(0, n_points, (args.batch_size,))
    return inputs_all[idx], labels_all[idx]


def triplet_loss(embeddings, labels):
    """L2 triplet loss with one random positive and one random negative per anchor."""
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    not_self = ~torch.eye(len(labels), dtype=torch.bool)
    positive = torch.multinomial((same & not_self).float() + 1e-6, 1).squeeze(1)
    negative = torch.multinomial((~same).float() + 1e-6, 1).squeeze(1)
    return F.triplet_margin_loss(embeddings, embeddings[positive], embeddings[negative],
                                 margin=args.triplet_margin)


# phase 1: the teacher, trained with the triplet loss
teacher = Embedding(hidden=64, embedding_size=32)
teacher_optimizer = torch.optim.Adam(teacher.parameters(), lr=3e-3, weight_decay=1e-5)
for step in range(args.teacher_steps):
    x, y = sample_batch()
    loss = triplet_loss(teacher(x), y)
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    if step % 20 == 0:
        print(f"teacher {step} triplet loss {loss.item():.4f}")

# phase 2: RKD of the student from the frozen teacher
student = Embedding(hidden=16, embedding_size=16)
teacher.eval()
optimizer = torch.optim.Adam(student.parameters(), lr=3e-3, weight_decay=1e-5)
for step in range(args.distill_steps):
    x, _ = sample_batch()
    with torch.no_grad():
        t_e = teacher(x)
    e = student(x)
    dist_loss = args.dist_ratio * rkd_distance_loss(e, t_e)
    angle_loss = args.angle_ratio * rkd_angle_loss(e, t_e)
    loss = dist_loss + angle_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"distill {step} loss {loss.item():.4f} dist {dist_loss.item():.4f}"
              f" angle {angle_loss.item():.4f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
