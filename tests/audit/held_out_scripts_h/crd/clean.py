"""Contrastive representation distillation at a tiny size, written after Tian, Krishnan and Isola,
"Contrastive Representation Distillation" (ICLR 2020, arXiv:1910.10699), sections 3.1-3.4, with
HobbitLong/RepDistiller (https://github.com/HobbitLong/RepDistiller, train_student.py,
helper/loops.py train_distill, crd/criterion.py CRDLoss, Embed and ContrastLoss, crd/memory.py
ContrastMemory). Two phases: a teacher is first trained by cross-entropy (train_teacher.py); then it
is frozen (eval(), its forward under torch.no_grad()) and a smaller student is trained by
cross-entropy plus beta times the CRD loss on the penultimate features: a linear embedding with L2
normalisation on each side (embed_s for the student, embed_t for the teacher, both trained, as the
trainable_list of train_student.py holds them with the student), scored against K negatives and the
positive drawn from two memory banks of past embeddings (one per side, one row per training
sample), exp(<v, m> / T) divided by a normalisation constant Z fixed from the first batch as a
number, and the NCE loss of Eq. 18 in both directions. The memory rows of the batch's samples are
then updated by momentum, m <- normalise(mu * m + (1 - mu) * v), under torch.no_grad(), so the
banks carry no graph. Gaussian clusters in a low-dimensional space, lifted by a random map, made in
the script. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=15)
parser.add_argument("--distill-steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--feat-dim", type=int, default=16)
parser.add_argument("--nce-k", type=int, default=64)
parser.add_argument("--nce-t", type=float, default=0.1)
parser.add_argument("--nce-m", type=float, default=0.5)
parser.add_argument("--beta", type=float, default=0.8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, n_classes, n_data = 16, 4, 256
lift = torch.randn(4, dim)
labels = torch.randint(0, n_classes, (n_data,))
inputs_all = torch.tanh((2 * torch.randn(n_classes, 4)[labels] + torch.randn(n_data, 4)) @ lift / 2)


class Net(nn.Module):
    """An MLP whose forward returns its penultimate features and its logits."""

    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, width),
                                  nn.ReLU())
        self.fc = nn.Linear(width, n_classes)

    def forward(self, x):
        feat = self.body(x)
        return feat, self.fc(feat)


class Embed(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.linear = nn.Linear(dim_in, dim_out)

    def forward(self, x):
        return F.normalize(self.linear(x), dim=1)


class ContrastMemory(nn.Module):
    """Two banks of past embeddings, n_data rows each, kept as buffers and updated by momentum."""

    def __init__(self, feat_dim, n_rows, k, temperature, momentum):
        super().__init__()
        self.k, self.temperature, self.momentum = k, temperature, momentum
        self.z_v1 = self.z_v2 = None
        stdv = 1.0 / math.sqrt(feat_dim / 3)
        self.register_buffer("memory_v1", torch.rand(n_rows, feat_dim) * 2 * stdv - stdv)
        self.register_buffer("memory_v2", torch.rand(n_rows, feat_dim) * 2 * stdv - stdv)

    def forward(self, v1, v2, index, contrast_idx):
        idx = torch.cat([index.unsqueeze(1), contrast_idx], 1)
        weight_v1 = self.memory_v1[idx]
        out_v2 = torch.exp(torch.bmm(weight_v1, v2.unsqueeze(2)).squeeze(2) / self.temperature)
        weight_v2 = self.memory_v2[idx]
        out_v1 = torch.exp(torch.bmm(weight_v2, v1.unsqueeze(2)).squeeze(2) / self.temperature)
        if self.z_v1 is None:
            self.z_v1 = out_v1.mean().item() * self.memory_v1.size(0)
            self.z_v2 = out_v2.mean().item() * self.memory_v2.size(0)
        out_v1, out_v2 = out_v1 / self.z_v1, out_v2 / self.z_v2
        with torch.no_grad():
            pos_v1 = self.memory_v1[index] * self.momentum + v1 * (1 - self.momentum)
            self.memory_v1.index_copy_(0, index, F.normalize(pos_v1, dim=1))
            pos_v2 = self.memory_v2[index] * self.momentum + v2 * (1 - self.momentum)
            self.memory_v2.index_copy_(0, index, F.normalize(pos_v2, dim=1))
        return out_v1, out_v2


def contrast_loss(x, n_rows, eps=1e-7):
    """Eq. 18: the positive in column 0, K negatives from a uniform noise distribution."""
    m = x.size(1) - 1
    noise = m / n_rows
    log_d1 = torch.log(x[:, 0] / (x[:, 0] + noise + eps))
    log_d0 = torch.log(noise / (x[:, 1:] + noise + eps))
    return -(log_d1.sum() + log_d0.sum()) / x.size(0)


# phase 1: the teacher, cross-entropy
teacher = Net(64)
teacher_optimizer = torch.optim.SGD(teacher.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.teacher_steps):
    index = torch.randint(0, n_data, (args.batch_size,))
    loss = F.cross_entropy(teacher(inputs_all[index])[1], labels[index])
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    print(f"teacher {step} loss {loss.item():.4f}")

# phase 2: the student, cross-entropy + beta * CRD against the frozen teacher
teacher.eval()
student = Net(32)
embed_s = Embed(32, args.feat_dim)
embed_t = Embed(64, args.feat_dim)
contrast = ContrastMemory(args.feat_dim, n_data, args.nce_k, args.nce_t, args.nce_m)
trainable_list = nn.ModuleList([student, embed_s, embed_t])
optimizer = torch.optim.SGD(trainable_list.parameters(), lr=args.lr, momentum=0.9,
                            weight_decay=5e-4)
for step in range(args.distill_steps):
    index = torch.randperm(n_data)[:args.batch_size]
    contrast_idx = torch.randint(0, n_data, (args.batch_size, args.nce_k))
    x, y = inputs_all[index], labels[index]
    feat_s, logit_s = student(x)
    with torch.no_grad():
        feat_t, logit_t = teacher(x)
    f_s = embed_s(feat_s)
    f_t = embed_t(feat_t)
    out_s, out_t = contrast(f_s, f_t, index, contrast_idx)
    loss_kd = contrast_loss(out_s, n_data) + contrast_loss(out_t, n_data)
    loss_cls = F.cross_entropy(logit_s, y)
    loss = loss_cls + args.beta * loss_kd
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"distill {step} cls {loss_cls.item():.4f} crd {loss_kd.item():.4f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict(),
                "embed_s": embed_s.state_dict(), "embed_t": embed_t.state_dict(),
                "contrast": contrast.state_dict()}, args.out)
