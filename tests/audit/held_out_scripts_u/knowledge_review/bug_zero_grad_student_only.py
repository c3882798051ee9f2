"""Knowledge review distillation of a small MLP student from a larger MLP teacher on synthetic
classification data, written after Chen, Liu, Zhao and Jia, "Distilling Knowledge via Knowledge
Review" (CVPR 2021, arXiv:2104.09044): the student's features of every stage are "reviewed"
from the deepest stage down, an attention-based fusion (ABF) module at each stage transforms
the student feature, fuses it with the fused feature handed down from the deeper stage through
two attention weights predicted from both, and maps the result to the teacher's width, and a
hierarchical context loss (HCL), the mean squared error between each fused feature and the
teacher's feature of that stage plus the errors of their pooled summaries at coarser levels,
is added to the student's cross-entropy. Two phases: the teacher is trained first and then
frozen, then the student and the ABF modules are trained together against it. With the
authors' code, dvlab-research/ReviewKD (https://github.com/dvlab-research/ReviewKD,
CIFAR-100/model/reviewkd.py: ABF.forward applies conv1 (1x1 conv and batch norm) to the
student feature, and, if it fuses, att_conv (a conv to two channels and a sigmoid) on the
concatenation with the residual from the deeper stage, x = x * z[:, 0] + y * z[:, 1], then
conv2 (conv and batch norm) to the teacher's channels, returning the output and x as the next
residual; ReviewKD.forward runs the reversed student features through the reversed ABFs,
inserting each output at the front; hcl adds to F.mse_loss(fs, ft) the losses of
adaptive_avg_pool2d to 4, 2 and 1 with weights halved each level and divides by their sum;
CIFAR-100/train.py: the teacher loaded by load_teacher_weight with requires_grad = False and
its pre-activation features, the student and the ABFs wrapped in one module trained by SGD
with Nesterov momentum, and per iteration cnn.zero_grad(), the loss cross-entropy plus
hcl(s_features, t_features) * min(1, epoch / kd_warm_up) * kd_loss_weight, loss.backward(),
cnn_optimizer.step()), whose steps this script follows. Here features are vectors: the convs
are linear layers with batch norm, the pyramid pools the feature vector as a 1-D map to
lengths 4, 2 and 1, and the warm-up counts steps; the data are ten Gaussian classes in 16
dimensions pushed through a fixed random nonlinearity.
Bug: the loop clears the gradients with student.zero_grad(), the student module only, so the
ABF modules' gradients are never cleared and pile up from step to step."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=150)
parser.add_argument("--distill-steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--kd-loss-weight", type=float, default=1.0)
parser.add_argument("--kd-warm-up", type=float, default=20.0, help="steps of the HCL warm-up")
parser.add_argument("--out", default=None, help="where to save the teacher, student and ABFs")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_classes, in_dim, n_points = 10, 16, 800
centres = 2.0 * torch.randn(n_classes, in_dim)
labels_all = torch.randint(0, n_classes, (n_points,))
mixing = torch.randn(in_dim, in_dim) / in_dim ** 0.5
inputs_all = torch.tanh((centres[labels_all] + 1.5 * torch.randn(n_points, in_dim)) @ mixing)


class StagedMLP(nn.Module):
    """An MLP in stages; returns the feature of every stage and the logits."""

    def __init__(self, widths):
        super().__init__()
        dims = [in_dim] + widths
        self.stages = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.fc = nn.Linear(widths[-1], n_classes)

    def forward(self, x, preact=False):
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x if preact else F.relu(x))
            x = F.relu(x)
        return feats, self.fc(x)


class ABF(nn.Module):
    def __init__(self, in_channel, mid_channel, out_channel, fuse):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Linear(in_channel, mid_channel, bias=False),
                                   nn.BatchNorm1d(mid_channel))
        self.conv2 = nn.Sequential(nn.Linear(mid_channel, out_channel, bias=False),
                                   nn.BatchNorm1d(out_channel))
        self.att_conv = (nn.Sequential(nn.Linear(mid_channel * 2, 2), nn.Sigmoid())
                         if fuse else None)
        nn.init.kaiming_uniform_(self.conv1[0].weight, a=1)
        nn.init.kaiming_uniform_(self.conv2[0].weight, a=1)

    def forward(self, x, y=None):
        x = self.conv1(x)
        if self.att_conv is not None:
            z = self.att_conv(torch.cat([x, y], dim=1))
            x = x * z[:, 0:1] + y * z[:, 1:2]
        return self.conv2(x), x


class ReviewKD(nn.Module):
    def __init__(self, student, in_channels, out_channels):
        super().__init__()
        self.student = student
        mid_channel = min(512, in_channels[-1])
        abfs = nn.ModuleList()
        for idx, in_channel in enumerate(in_channels):
            abfs.append(ABF(in_channel, mid_channel, out_channels[idx],
                            idx < len(in_channels) - 1))
        self.abfs = abfs[::-1]

    def forward(self, x):
        student_features, logit = self.student(x)
        x = student_features[::-1]
        results = []
        out_features, res_features = self.abfs[0](x[0])
        results.append(out_features)
        for features, abf in zip(x[1:], self.abfs[1:]):
            out_features, res_features = abf(features, res_features)
            results.insert(0, out_features)
        return results, logit


def hcl(fstudent, fteacher):
    loss_all = 0.0
    for fs, ft in zip(fstudent, fteacher):
        fs, ft = fs.unsqueeze(1), ft.unsqueeze(1)
        h = fs.shape[-1]
        loss = F.mse_loss(fs, ft, reduction="mean")
        cnt, tot = 1.0, 1.0
        for level in [4, 2, 1]:
            if level >= h:
                continue
            cnt /= 2.0
            loss = loss + F.mse_loss(F.adaptive_avg_pool1d(fs, level),
                                     F.adaptive_avg_pool1d(ft, level), reduction="mean") * cnt
            tot += cnt
        loss_all = loss_all + loss / tot
    return loss_all


# phase 1: train the teacher with cross-entropy
teacher_widths, student_widths = [64, 64, 64], [24, 24, 24]
teacher = StagedMLP(teacher_widths)
t_optimizer = torch.optim.SGD(teacher.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                              weight_decay=5e-4)
for step in range(args.teacher_steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    _, t_logits = teacher(inputs_all[idx])
    t_loss = F.cross_entropy(t_logits, labels_all[idx])
    t_optimizer.zero_grad()
    t_loss.backward()
    t_optimizer.step()
    if step % 50 == 0:
        print(f"teacher {step} loss {t_loss.item():.4f}")
for p in teacher.parameters():
    p.requires_grad = False

# phase 2: the student and the ABFs against the frozen teacher's pre-activation features
student = StagedMLP(student_widths)
distiller = ReviewKD(student, in_channels=student_widths, out_channels=teacher_widths)
optimizer = torch.optim.SGD(distiller.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                            weight_decay=5e-4)
for step in range(args.distill_steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    images, labels = inputs_all[idx], labels_all[idx]
    student.zero_grad()
    s_features, pred = distiller(images)
    t_features, t_pred = teacher(images, preact=True)
    warm = min(1.0, (step + 1) / args.kd_warm_up)
    review_kd_loss = hcl(s_features, t_features) * warm * args.kd_loss_weight
    cls_loss = F.cross_entropy(pred, labels)
    loss = review_kd_loss + cls_loss
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"distill {step} review {review_kd_loss.item():.4f} cls {cls_loss.item():.4f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict(),
                "abfs": distiller.abfs.state_dict()}, args.out)
