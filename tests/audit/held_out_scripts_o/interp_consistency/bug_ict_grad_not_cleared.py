"""Interpolation consistency training at a tiny size, written after Verma, Lamb, Kannala, Bengio
and Lopez-Paz, "Interpolation Consistency Training for Semi-Supervised Learning" (IJCAI 2019,
arXiv:1903.03825), section 3 and algorithm 1: a mean teacher, the exponential moving average of
the student's weights, predicts on two batches of unlabelled points, and the interpolation of its
two predictions is the target of the student's prediction at the same interpolation of the
points, with a consistency weight ramped up by a sigmoid schedule beside a mixup loss on the
labelled batch. With vikasverma1077/ICT (https://github.com/vikasverma1077/ICT, main.py:
getNetwork(args, num_classes, ema=True), which calls param.detach_() on every parameter of the
EMA model; mixup_data_sup and mixup_criterion for the labelled batch; mixup_data, which mixes the
unlabelled inputs and the EMA model's logits with the same lambda and permutation; train, which
detaches ema_logit_unlabeled, passes the student's model(mixedup_x) and the mixed target to
softmax_mse_loss, divides by the minibatch size, calls optimizer.zero_grad() before
loss.backward() and optimizer.step(), then update_ema_variables; train_sl for the supervised
run; update_ema_variables, which uses alpha = min(1 - 1 / (global_step + 1), ema_decay); and
mean_teacher/losses.py softmax_mse_loss). Two phases: a supervised warm-up of the student on the
few labels, as train_sl does, then ICT with a mean teacher made from the warmed-up student. Two
moons made in the script, ten of them labelled. Bug: the ICT phase's loop, written anew for the
mean teacher and the mixed batches, calls no optimizer.zero_grad() before loss.backward()
(vikasverma1077/ICT's main.py train, like train_sl, calls optimizer.zero_grad() before every
backward), so the student's .grad keeps the last gradient of the warm-up phase and every ICT step
adds its gradient to the sum of all before it: the nesterov SGD steps the student on that running
sum of supervised and consistency gradients, and the mean teacher averages the drifting student;
second phase of a two-phase script."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=15)
parser.add_argument("--ict-steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--ema-decay", type=float, default=0.9)
parser.add_argument("--mixup-consistency", type=float, default=10.0)
parser.add_argument("--rampup-steps", type=int, default=10)
parser.add_argument("--mixup-sup-alpha", type=float, default=1.0)
parser.add_argument("--mixup-usup-alpha", type=float, default=2.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, hidden_dim = 2, 32


def make_moons(n, noise=0.15):
    y = torch.randint(0, 2, (n,))
    angle = math.pi * torch.rand(n)
    x = torch.stack([torch.cos(angle), torch.sin(angle)], dim=1)
    x = torch.where(y[:, None] == 1, torch.stack([1 - x[:, 0], 0.5 - x[:, 1]], dim=1), x)
    return x + noise * torch.randn(n, 2), y


def make_net():
    return nn.Sequential(nn.Linear(2, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim),
                         nn.ReLU(), nn.Linear(hidden_dim, n_classes))


def sigmoid_rampup(current, length):
    current = min(max(current, 0.0), length)
    return math.exp(-5.0 * (1.0 - current / length) ** 2)


def softmax_mse_loss(input_logits, target_logits):
    return F.mse_loss(F.softmax(input_logits, dim=1), F.softmax(target_logits, dim=1),
                      reduction="sum") / n_classes


def update_ema_variables(model, ema_model, alpha, global_step):
    alpha = min(1 - 1 / (global_step + 1), alpha)
    for ema_param, param in zip(ema_model.parameters(), model.parameters()):
        ema_param.data.mul_(alpha).add_(param.data, alpha=1 - alpha)


x_labelled, y_labelled = make_moons(10)
x_unlabelled, _ = make_moons(512)
model = make_net()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4,
                            nesterov=True)
beta_sup = torch.distributions.Beta(args.mixup_sup_alpha, args.mixup_sup_alpha)
beta_usup = torch.distributions.Beta(args.mixup_usup_alpha, args.mixup_usup_alpha)

# phase 1: the student alone on the labelled points
for step in range(args.warmup_steps):
    class_loss = F.cross_entropy(model(x_labelled), y_labelled)
    optimizer.zero_grad()
    class_loss.backward()
    optimizer.step()
    print(f"warm-up {step} class {class_loss.item():.4f}")

# phase 2: ICT with a mean teacher made from the warmed-up student
ema_model = make_net()
ema_model.load_state_dict(model.state_dict())
for param in ema_model.parameters():
    param.detach_()
for step in range(args.ict_steps):
    u = x_unlabelled[torch.randint(0, x_unlabelled.shape[0], (args.batch_size,))]
    lam = beta_sup.sample().item()
    index = torch.randperm(x_labelled.shape[0])
    output_mixed_l = model(lam * x_labelled + (1 - lam) * x_labelled[index])
    class_loss = (lam * F.cross_entropy(output_mixed_l, y_labelled)
                  + (1 - lam) * F.cross_entropy(output_mixed_l, y_labelled[index]))

    with torch.no_grad():
        ema_logit_unlabeled = ema_model(u)
        lam_u = beta_usup.sample().item()
        index_u = torch.randperm(args.batch_size)
        mixedup_x = lam_u * u + (1 - lam_u) * u[index_u]
        mixedup_target = lam_u * ema_logit_unlabeled + (1 - lam_u) * ema_logit_unlabeled[index_u]
    output_mixed_u = model(mixedup_x)
    mixup_consistency_loss = softmax_mse_loss(output_mixed_u, mixedup_target) / args.batch_size
    weight = args.mixup_consistency * sigmoid_rampup(step, args.rampup_steps)

    loss = class_loss + weight * mixup_consistency_loss
    loss.backward()
    optimizer.step()
    update_ema_variables(model, ema_model, args.ema_decay, step + 1)
    print(f"ict {step} class {class_loss.item():.4f} "
          f"consistency {mixup_consistency_loss.item():.5f} weight {weight:.3f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"ema_model.{k}": v for k, v in ema_model.state_dict().items()}}, args.out)
