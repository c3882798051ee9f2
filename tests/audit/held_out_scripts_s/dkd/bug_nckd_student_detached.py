"""Decoupled Knowledge Distillation (DKD) of a small MLP student from a larger MLP teacher, written
after Zhao, Cui, Song, Qiu and Liang, "Decoupled Knowledge Distillation" (CVPR 2022,
arXiv:2203.08679): the classical KD loss is split into target-class knowledge distillation
(TCKD), the KL divergence between the teacher's and the student's binary distributions (p_t,
1 - p_t) of the target class against all the others, and non-target-class knowledge
distillation (NCKD), the KL divergence between their distributions over the non-target classes
alone, both at temperature T; the student is trained on cross-entropy plus alpha * TCKD + beta *
NCKD, the teacher being fixed. Two phases: the teacher is trained on the labels first, then
distilled into the student. With the authors' code, megvii-research/mdistiller
(https://github.com/megvii-research/mdistiller, mdistiller/distillers/DKD.py: DKD.forward_train
computes the student's logits with their graph and the teacher's under torch.no_grad(), adds
ce_loss_weight * cross-entropy and min(epoch / warmup, 1) * dkd_loss; dkd_loss forms the target
and non-target masks (_get_gt_mask, _get_other_mask), the binary distributions of the softmax at
temperature T (cat_mask), TCKD = kl_div(log of the student's binary distribution, the teacher's)
* T^2 / batch and NCKD = kl_div(log_softmax(student / T - 1000 * gt_mask), softmax(teacher / T -
1000 * gt_mask)) * T^2 / batch, returning alpha * tckd + beta * nckd; _base.py Distiller.train
keeps the teacher in eval mode and get_learnable_parameters returns the student's parameters
only; mdistiller/engine/trainer.py BaseTrainer.init_optimizer builds SGD with momentum and weight
decay over those, and train_iter runs optimizer.zero_grad(), the distiller's forward, the backward
of the summed losses and optimizer.step()), with its CIFAR settings CE weight 1, alpha 1, beta 8,
T 4 and a linear warm-up of the distillation weight over the first epochs. The masks here come
from F.one_hot and the losses are written anew. The data: Gaussian clusters in pairs of similar
classes, made in the script, so that the teacher's non-target probabilities carry knowledge.
Bug: the student's non-target distribution is formed from detached logits, log_q_student =
F.log_softmax(logits_student.detach() / T - 1000 * gt_mask), as the teacher's side would be,
where mdistiller's dkd_loss keeps the student's graph in log_pred_student_part2: NCKD, the term
DKD weights by beta = 8 to restore the dark knowledge that classical KD suppresses, still shows
its value in the log but sends no gradient to the student, which learns from cross-entropy and
TCKD only and never matches the teacher's distribution over the non-target classes."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=150)
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--steps-per-epoch", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--ce-weight", type=float, default=1.0)
parser.add_argument("--alpha", type=float, default=1.0, help="weight of TCKD")
parser.add_argument("--beta", type=float, default=8.0, help="weight of NCKD")
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--warmup", type=int, default=5, help="epochs of the DKD weight's warm-up")
parser.add_argument("--out", default=None, help="where to save the teacher and the student")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, n_classes, n_train = 16, 6, 1024
pair_centres = 2.0 * torch.randn(n_classes // 2, dim)
centres = pair_centres.repeat_interleave(2, 0) + 0.8 * torch.randn(n_classes, dim)
labels_all = torch.randint(0, n_classes, (n_train,))
data_all = centres[labels_all] + torch.randn(n_train, dim)

teacher = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                        nn.Linear(64, n_classes))
student = nn.Sequential(nn.Linear(dim, 12), nn.ReLU(), nn.Linear(12, n_classes))


def dkd_loss(logits_student, logits_teacher, target, alpha, beta, temperature):
    gt_mask = F.one_hot(target, logits_student.shape[1]).bool()
    p_student = F.softmax(logits_student / temperature, dim=1)
    p_teacher = F.softmax(logits_teacher / temperature, dim=1)
    # target-class KD: binary distributions (p_target, p_not_target)
    b_student = torch.stack([(p_student * gt_mask).sum(1), (p_student * ~gt_mask).sum(1)], 1)
    b_teacher = torch.stack([(p_teacher * gt_mask).sum(1), (p_teacher * ~gt_mask).sum(1)], 1)
    tckd = F.kl_div(torch.log(b_student), b_teacher, reduction="sum")
    tckd = tckd * temperature ** 2 / target.shape[0]
    # non-target-class KD: distributions over the non-target classes only
    log_q_student = F.log_softmax(logits_student.detach() / temperature - 1000.0 * gt_mask, dim=1)
    q_teacher = F.softmax(logits_teacher / temperature - 1000.0 * gt_mask, dim=1)
    nckd = F.kl_div(log_q_student, q_teacher, reduction="sum")
    nckd = nckd * temperature ** 2 / target.shape[0]
    return alpha * tckd + beta * nckd, tckd, nckd


# phase 1: train the teacher on the labels
teacher_optimizer = torch.optim.SGD(teacher.parameters(), lr=0.05, momentum=0.9,
                                    weight_decay=5e-4)
for step in range(args.teacher_steps):
    idx = torch.randint(0, n_train, (args.batch_size,))
    loss = F.cross_entropy(teacher(data_all[idx]), labels_all[idx])
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    if step % 50 == 0:
        print(f"teacher step {step} ce {loss.item():.3f}")

# phase 2: distil the fixed teacher into the student with DKD
teacher.eval()
optimizer = torch.optim.SGD(student.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
for epoch in range(1, args.epochs + 1):
    for it in range(args.steps_per_epoch):
        idx = torch.randint(0, n_train, (args.batch_size,))
        image, target = data_all[idx], labels_all[idx]
        logits_student = student(image)
        with torch.no_grad():
            logits_teacher = teacher(image)
        loss_ce = args.ce_weight * F.cross_entropy(logits_student, target)
        loss_dkd, tckd, nckd = dkd_loss(logits_student, logits_teacher, target, args.alpha,
                                        args.beta, args.temperature)
        loss_dkd = min(epoch / args.warmup, 1.0) * loss_dkd
        loss = loss_ce + loss_dkd
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if epoch % 5 == 0:
        print(f"epoch {epoch} ce {loss_ce.item():.3f} tckd {tckd.item():.4f}"
              f" nckd {nckd.item():.4f}")

with torch.no_grad():
    acc_t = (teacher(data_all).argmax(1) == labels_all).float().mean().item()
    acc_s = (student(data_all).argmax(1) == labels_all).float().mean().item()
print(f"train accuracy: teacher {acc_t:.3f} student {acc_s:.3f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
