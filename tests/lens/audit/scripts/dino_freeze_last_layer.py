"""DINO with the head's last layer frozen for the first epoch, at a tiny size, written after
Caron, Touvron, Misra, Jegou, Mairal, Bojanowski and Joulin, "Emerging Properties in
Self-Supervised Vision Transformers" (ICCV 2021, arXiv:2104.14294) and facebookresearch/dino
(main_dino.py, ``train_one_epoch`` and ``DINOLoss``; utils.py, ``cancel_gradients_last_layer``):
a student and a teacher, each a backbone and a projection head ending in ``last_layer``, see two
views; the student's softmax predicts the teacher's centred and sharpened softmax of the other
view; the teacher is frozen ON PURPOSE for the whole run and follows the student as an
exponential moving average, updated by hand after each step. As published, a helper called
after the backward pass cancels the gradients of the student's ``last_layer`` (``p.grad =
None``) unless the epoch has reached ``--freeze-last-layer``: the first of 3 epochs at the
defaults, and the last layer trains from the second on (a scheduled freeze that ends). The
last layer is a plain linear layer here (no weight normalisation). Vectors made in the script,
views by masking and noise. AdamW. As published: clean. ``--out PATH`` saves the student's and
the teacher's state_dicts after the run, ``--init-out PATH`` before it."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=24)
parser.add_argument("--freeze-last-layer", type=int, default=1)
parser.add_argument("--momentum-teacher", type=float, default=0.99)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat, out_dim = 12, 8, 16
centers = torch.randn(6, dim)
data = centers[torch.randint(0, 6, (96,))] + 0.3 * torch.randn(96, dim)


class DINOHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(feat, 32), nn.GELU(), nn.Linear(32, 8))
        self.last_layer = nn.Linear(8, out_dim, bias=False)

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))


class MultiCropWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
        self.head = DINOHead()

    def forward(self, x):
        return self.head(self.backbone(x))


student = MultiCropWrapper()
teacher = copy.deepcopy(student)
teacher.requires_grad_(False)
optimizer = torch.optim.AdamW(student.parameters(), lr=5e-3, weight_decay=0.04)
center = torch.zeros(1, out_dim)


def state():
    return {**{f"student.{k}": v for k, v in student.state_dict().items()},
            **{f"teacher.{k}": v for k, v in teacher.state_dict().items()}}


if args.init_out:
    torch.save(state(), args.init_out)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
    if epoch >= freeze_last_layer:
        return
    for n, p in model.named_parameters():
        if "last_layer" in n:
            p.grad = None


def dino_loss(student_out, teacher_out, student_temp=0.1, teacher_temp=0.04):
    global center
    teacher_probs = [F.softmax((t - center) / teacher_temp, dim=-1) for t in teacher_out]
    total, n_terms = 0, 0
    for iq, q in enumerate(teacher_probs):
        for v, s in enumerate(student_out):
            if v == iq:
                continue
            total = total + torch.sum(-q * F.log_softmax(s / student_temp, dim=-1), dim=-1).mean()
            n_terms += 1
    with torch.no_grad():
        batch_center = torch.cat(teacher_out).mean(dim=0, keepdim=True)
        center = center * 0.9 + batch_center * 0.1
    return total / n_terms


iters_per_epoch = len(data) // args.batch_size
for epoch in range(args.epochs):
    order = torch.randperm(len(data))
    for it in range(iters_per_epoch):
        batch = data[order[it * args.batch_size:(it + 1) * args.batch_size]]
        views = [augment(batch), augment(batch)]
        with torch.no_grad():
            teacher_output = [teacher(v) for v in views]
        student_output = [student(v) for v in views]
        loss = dino_loss(student_output, teacher_output)
        optimizer.zero_grad()
        loss.backward()
        cancel_gradients_last_layer(epoch, student, args.freeze_last_layer)
        optimizer.step()
        # EMA update for the teacher
        with torch.no_grad():
            for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                param_k.mul_(args.momentum_teacher).add_((1 - args.momentum_teacher) * param_q)
        print(f"epoch {epoch} iteration {epoch * iters_per_epoch + it} loss {loss.item():.4f}")

if args.out:
    torch.save(state(), args.out)
