"""Variational information distillation (VID) from a trained teacher MLP into a narrower student
MLP on a synthetic classification task, written after Ahn, Hu, Damianou, Lawrence and Dai,
"Variational Information Distillation for Knowledge Transfer" (CVPR 2019, arXiv:1904.05835):
the mutual information between a teacher layer t and a student layer s is bounded from below
with a variational Gaussian q(t | s) whose mean mu(s) is a small regressor network on the
student's features and whose per-channel variance sigma^2 = softplus(alpha) + eps is a learned
parameter, so the student minimises, besides its cross-entropy, the negative log-likelihood
0.5 * ((mu(s) - t)^2 / sigma^2 + log sigma^2) of the teacher's features, which trains the
student, the regressors and the variances together while the teacher stays fixed. Two phases:
the teacher is trained first on the labels, then frozen and distilled. With the code of
HobbitLong/RepDistiller (https://github.com/HobbitLong/RepDistiller, distiller_zoo/VID.py
VIDLoss: a regressor of three bias-free 1x1 convolutions with ReLUs between them predicts the
teacher's feature map from the student's, and log_scale, a Parameter initialised so that the
softplus variance starts at init_pred_var = 5, gives pred_var = log(1 + exp(log_scale)) + eps;
forward returns the mean of 0.5 * ((pred_mean - target)^2 / pred_var + log(pred_var));
train_student.py main: for --distill vid one VIDLoss per intermediate feature pair
(feat[1:-1]) is kept in criterion_kd and appended to trainable_list, "as some parameters in
VIDLoss need to be updated", and the SGD optimizer is built over trainable_list.parameters(),
the student and the VID modules, with the teacher appended to module_list only afterwards;
helper/loops.py train_distill: teacher in eval mode, its features computed under
torch.no_grad() and detached, loss = gamma * cross-entropy + alpha * KD + beta * sum of the
VID losses, then optimizer.zero_grad(), loss.backward(), optimizer.step()), whose steps this
script follows with gamma = 1, alpha = 0 and beta = 1. The 1x1 convolutions become Linear
layers on the MLPs' hidden features; the data are noisy points around five class centres.
As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=60)
parser.add_argument("--distill-steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--gamma", type=float, default=1.0, help="weight of the cross-entropy")
parser.add_argument("--beta", type=float, default=1.0, help="weight of the VID losses")
parser.add_argument("--init-pred-var", type=float, default=5.0)
parser.add_argument("--out", default=None, help="where to save the teacher, student and VID modules")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, n_classes, n_samples = 20, 5, 1024
centres = 1.5 * torch.randn(n_classes, in_dim)
labels_all = torch.randint(0, n_classes, (n_samples,))
inputs_all = centres[labels_all] + torch.randn(n_samples, in_dim)


class MLPNet(nn.Module):
    """A stem and three hidden blocks; returns the features of each stage and the logits."""

    def __init__(self, width):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(in_dim, width), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.ReLU())
                                     for _ in range(3)])
        self.fc = nn.Linear(width, n_classes)

    def forward(self, x):
        h = self.stem(x)
        feats = [h]
        for block in self.blocks:
            h = block(h)
            feats.append(h)
        return feats, self.fc(h)


class VIDLoss(nn.Module):
    def __init__(self, num_input, num_mid, num_target, init_pred_var=5.0, eps=1e-5):
        super().__init__()
        self.regressor = nn.Sequential(
            nn.Linear(num_input, num_mid, bias=False), nn.ReLU(),
            nn.Linear(num_mid, num_mid, bias=False), nn.ReLU(),
            nn.Linear(num_mid, num_target, bias=False))
        self.log_scale = nn.Parameter(
            math.log(math.exp(init_pred_var - eps) - 1.0) * torch.ones(num_target))
        self.eps = eps

    def forward(self, student_feat, target):
        pred_mean = self.regressor(student_feat)
        pred_var = F.softplus(self.log_scale) + self.eps
        neg_log_prob = 0.5 * ((pred_mean - target) ** 2 / pred_var + torch.log(pred_var))
        return neg_log_prob.mean()


def batch():
    idx = torch.randint(0, n_samples, (args.batch_size,))
    return inputs_all[idx], labels_all[idx]


# phase 1: train the teacher on the labels
teacher = MLPNet(64)
teacher_optimizer = torch.optim.SGD(teacher.parameters(), lr=args.lr, momentum=0.9,
                                    weight_decay=5e-4)
for step in range(args.teacher_steps):
    x, y = batch()
    _, logit_t = teacher(x)
    loss = F.cross_entropy(logit_t, y)
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    if step % 20 == 0:
        print(f"teacher {step} loss {loss.item():.4f}")

# phase 2: distil the frozen teacher into the student with VID on the intermediate features
teacher.eval()
for p in teacher.parameters():
    p.requires_grad_(False)
student = MLPNet(32)
criterion_kd = nn.ModuleList([VIDLoss(32, 32, 64, args.init_pred_var) for _ in range(2)])
trainable_list = nn.ModuleList([student])
trainable_list.append(criterion_kd)  # the regressors and variances are trained too
optimizer = torch.optim.SGD(trainable_list.parameters(), lr=args.lr, momentum=0.9,
                            weight_decay=5e-4)
for step in range(args.distill_steps):
    x, y = batch()
    feat_s, logit_s = student(x)
    with torch.no_grad():
        feat_t, logit_t = teacher(x)
        feat_t = [f.detach() for f in feat_t]
    g_s, g_t = feat_s[1:-1], feat_t[1:-1]
    loss_cls = F.cross_entropy(logit_s, y)
    loss_kd = sum(c(f_s, f_t) for f_s, f_t, c in zip(g_s, g_t, criterion_kd))
    loss = args.gamma * loss_cls + args.beta * loss_kd
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"distill {step} cls {loss_cls.item():.4f} vid {loss_kd.item():.4f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict(),
                "criterion_kd": criterion_kd.state_dict()}, args.out)
