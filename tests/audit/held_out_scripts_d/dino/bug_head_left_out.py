"""DINO at a tiny size, written after Caron, Touvron, Misra, Jegou, Mairal, Bojanowski and Joulin,
"Emerging Properties in Self-Supervised Vision Transformers" (ICCV 2021), Algorithm 1, with the
training loop of facebookresearch/dino (https://github.com/facebookresearch/dino, main_dino.py):
a student (backbone and projection head) and a teacher of the same architecture, initialised with
the student's weights and not trained by the loss (requires_grad off); the student sees two
global and two local views, the teacher the global ones; the loss is the cross-entropy between
the teacher's centred, sharpened softmax and the student's softmax over pairs of different views;
the center is an exponential moving average of the teacher's outputs, the teacher an exponential
moving average of the student with a cosine momentum schedule. The optimizer (AdamW) holds the
whole student in two groups, weight decay on the weights only. A small MLP backbone and head on
vectors made in the script, the views made by noise and masking. Injected bug: the optimizer's
parameter groups are built from ``student.backbone`` only, so the projection head, which the loss
trains, is never stepped (and the teacher's head follows a head that stays at its
initialisation)."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out-dim", type=int, default=32)
parser.add_argument("--student-temp", type=float, default=0.1)
parser.add_argument("--teacher-temp", type=float, default=0.04)
parser.add_argument("--center-momentum", type=float, default=0.9)
parser.add_argument("--momentum-teacher", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, bottleneck = 16, 32, 8
means = 1.5 * torch.randn(6, dim)


def batch(n):
    return means[torch.randint(0, len(means), (n,))] + 0.5 * torch.randn(n, dim)


def views(x):
    global_views = [x + 0.3 * torch.randn_like(x) for _ in range(2)]
    local_views = [(x + 0.5 * torch.randn_like(x)) * (torch.rand_like(x) > 0.4) for _ in range(2)]
    return global_views + local_views


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(),
                                 nn.Linear(hidden, bottleneck))
        self.last_layer = nn.Linear(bottleneck, out_dim, bias=False)

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))


class MultiViewWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.head = DINOHead(hidden, args.out_dim)

    def forward(self, crops):
        return self.head(self.backbone(torch.cat(crops)))


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops):
        super().__init__()
        self.ncrops = ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))

    def forward(self, student_output, teacher_output):
        student_out = (student_output / args.student_temp).chunk(self.ncrops)
        teacher_out = F.softmax((teacher_output - self.center) / args.teacher_temp, dim=-1)
        teacher_out = teacher_out.detach().chunk(2)
        total_loss, n_loss_terms = 0, 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        self.update_center(teacher_output)
        return total_loss / n_loss_terms

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = teacher_output.mean(0, keepdim=True)
        self.center = self.center * args.center_momentum + batch_center * (1 - args.center_momentum)


def get_params_groups(model):
    regularized, not_regularized = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        group = not_regularized if name.endswith(".bias") or param.ndim == 1 else regularized
        group.append(param)
    return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.0}]


student, teacher = MultiViewWrapper(), MultiViewWrapper()
teacher.load_state_dict(student.state_dict())
for p in teacher.parameters():
    p.requires_grad = False
dino_loss = DINOLoss(args.out_dim, ncrops=4)
optimizer = torch.optim.AdamW(get_params_groups(student.backbone), lr=5e-3, weight_decay=0.04)
momentum_schedule = [1 - (1 - args.momentum_teacher) * (math.cos(math.pi * i / args.steps) + 1) / 2
                     for i in range(args.steps)]
for step in range(args.steps):
    crops = views(batch(args.batch_size))
    teacher_output = teacher(crops[:2])
    student_output = student(crops)
    loss = dino_loss(student_output, teacher_output)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        m = momentum_schedule[step]
        for param_q, param_k in zip(student.parameters(), teacher.parameters()):
            param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"student": student.state_dict(), "teacher": teacher.state_dict(),
                "dino_loss": dino_loss.state_dict()}, args.out)
