"""Meta Pseudo Labels at a tiny size, written after Pham, Dai, Xie, Luong and Le, "Meta Pseudo
Labels" (CVPR 2021, arXiv:2003.10580), section 3 and appendix A (the first-order teacher update:
the student learns from the teacher's hard pseudo labels, and the teacher is moved by the change
of the student's loss on labeled data, a scalar h with no gradient, times the gradient of the
teacher's cross-entropy on its own hard pseudo labels, plus its supervised and UDA losses), with
kekmodel/MPL-pytorch (https://github.com/kekmodel/MPL-pytorch, main.py train_loop: one teacher
forward on the labeled, weakly and strongly augmented batches; soft_pseudo_label from
t_logits_uw.detach() with a temperature and a confidence mask for the UDA term; the student's
s_loss_l_old from s_logits_l.detach() and its loss on hard_pseudo_label; s_loss_l_new under
torch.no_grad() after the student's step; dot_product = s_loss_l_new - s_loss_l_old, the
author's formula; t_loss_mpl = dot_product * F.cross_entropy(t_logits_us, hard_pseudo_label);
teacher_model.zero_grad() and student_model.zero_grad() after both steps; models.py ModelEMA,
a deepcopy of the student averaged under torch.no_grad(); main.py finetune, which loads the
averaged student's weights and fine-tunes the student alone on the labeled data with an SGD of
its own, model.zero_grad() before each forward). Two phases as in the reference: Meta Pseudo
Labels training of teacher and student, then fine-tuning of the student. Three spiral arms in
the plane, a few labeled points and many unlabeled ones; weak and strong augmentations are small
and large jitters. Made in the script. Injected bug: the teacher's cross-entropy on its own hard
pseudo labels is taken on t_logits_us.detach() (the form of MPL-pytorch's train_loop before its
issue #2), so t_loss_mpl = dot_product * CE is a number with no gradient: the student's feedback h
no longer moves the teacher, which learns from its supervised and UDA losses alone, as in UDA."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--finetune-steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--mu", type=int, default=2, help="unlabeled batch size multiplier")
parser.add_argument("--teacher-lr", type=float, default=0.02)
parser.add_argument("--student-lr", type=float, default=0.02)
parser.add_argument("--finetune-lr", type=float, default=0.01)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--temperature", type=float, default=0.7)
parser.add_argument("--threshold", type=float, default=0.6)
parser.add_argument("--lambda-u", type=float, default=1.0)
parser.add_argument("--uda-steps", type=int, default=10)
parser.add_argument("--ema", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, hidden_dim = 3, 32


def make_spirals(n):
    label = torch.randint(0, n_classes, (n,))
    r = torch.rand(n)
    angle = 2 * math.pi * label / n_classes + 2.5 * r
    x = torch.stack([r * angle.cos(), r * angle.sin()], dim=1)
    return x + 0.03 * torch.randn(n, 2), label


x_labeled, y_labeled = make_spirals(24)
x_unlabeled, _ = make_spirals(512)


def weak(x):
    return x + 0.02 * torch.randn_like(x)


def strong(x):
    return x * (1 + 0.2 * torch.randn(len(x), 1)) + 0.1 * torch.randn_like(x)


def mlp():
    return nn.Sequential(nn.Linear(2, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, n_classes))


class ModelEMA(nn.Module):
    def __init__(self, model, decay):
        super().__init__()
        self.module = copy.deepcopy(model)
        self.decay = decay

    def update_parameters(self, model):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.parameters(), model.parameters()):
                ema_v.copy_(self.decay * ema_v + (1 - self.decay) * model_v)


teacher_model, student_model = mlp(), mlp()
avg_student_model = ModelEMA(student_model, args.ema)
t_optimizer = torch.optim.SGD(teacher_model.parameters(), lr=args.teacher_lr,
                              momentum=args.momentum, nesterov=True)
s_optimizer = torch.optim.SGD(student_model.parameters(), lr=args.student_lr,
                              momentum=args.momentum, nesterov=True)

# phase 1: Meta Pseudo Labels, the teacher taught by the student's progress on labeled data
teacher_model.zero_grad()
student_model.zero_grad()
for step in range(args.steps):
    idx_l = torch.randint(0, len(x_labeled), (args.batch_size,))
    idx_u = torch.randint(0, len(x_unlabeled), (args.batch_size * args.mu,))
    images_l, targets = weak(x_labeled[idx_l]), y_labeled[idx_l]
    images_uw, images_us = weak(x_unlabeled[idx_u]), strong(x_unlabeled[idx_u])
    batch_size = len(images_l)
    t_logits = teacher_model(torch.cat((images_l, images_uw, images_us)))
    t_logits_l = t_logits[:batch_size]
    t_logits_uw, t_logits_us = t_logits[batch_size:].chunk(2)
    t_loss_l = F.cross_entropy(t_logits_l, targets)
    soft_pseudo_label = torch.softmax(t_logits_uw.detach() / args.temperature, dim=-1)
    max_probs, hard_pseudo_label = torch.max(soft_pseudo_label, dim=-1)
    mask = max_probs.ge(args.threshold).float()
    t_loss_u = torch.mean(
        -(soft_pseudo_label * torch.log_softmax(t_logits_us, dim=-1)).sum(dim=-1) * mask)
    weight_u = args.lambda_u * min(1.0, (step + 1) / args.uda_steps)
    t_loss_uda = t_loss_l + weight_u * t_loss_u

    s_logits = student_model(torch.cat((images_l, images_us)))
    s_logits_l, s_logits_us = s_logits[:batch_size], s_logits[batch_size:]
    s_loss_l_old = F.cross_entropy(s_logits_l.detach(), targets)
    s_loss = F.cross_entropy(s_logits_us, hard_pseudo_label)
    s_loss.backward()
    s_optimizer.step()
    avg_student_model.update_parameters(student_model)

    with torch.no_grad():
        s_logits_l = student_model(images_l)
    s_loss_l_new = F.cross_entropy(s_logits_l.detach(), targets)
    dot_product = s_loss_l_new - s_loss_l_old
    _, hard_pseudo_label = torch.max(t_logits_us.detach(), dim=-1)
    t_loss_mpl = dot_product * F.cross_entropy(t_logits_us.detach(), hard_pseudo_label)
    t_loss = t_loss_uda + t_loss_mpl
    t_loss.backward()
    t_optimizer.step()

    teacher_model.zero_grad()
    student_model.zero_grad()
    print(f"step {step} s_loss {s_loss.item():.4f} t_loss {t_loss.item():.4f} "
          f"mpl {t_loss_mpl.item():+.5f} mask {mask.mean().item():.2f}")

# phase 2: fine-tune the student, from the averaged weights, on the labeled data alone
student_model.load_state_dict(avg_student_model.module.state_dict())
ft_optimizer = torch.optim.SGD(student_model.parameters(), lr=args.finetune_lr,
                               momentum=args.momentum, nesterov=True)
for step in range(args.finetune_steps):
    idx = torch.randint(0, len(x_labeled), (args.batch_size,))
    student_model.zero_grad()
    loss = F.cross_entropy(student_model(weak(x_labeled[idx])), y_labeled[idx])
    loss.backward()
    ft_optimizer.step()
    print(f"finetune {step} loss {loss.item():.4f}")

if args.out:
    weights = {f"teacher.{k}": v.detach().clone() for k, v in teacher_model.state_dict().items()}
    weights.update({f"student.{k}": v.detach().clone()
                    for k, v in student_model.state_dict().items()})
    weights.update({f"avg_student.{k}": v.detach().clone()
                    for k, v in avg_student_model.module.state_dict().items()})
    torch.save(weights, args.out)
