"""Mean Teacher at a tiny size, written after Tarvainen and Valpola, "Mean teachers are better
role models" (arXiv:1703.01780) and CuriousAI/mean-teacher pytorch/main.py (``train``,
``update_ema_variables``, the sigmoid ramp-up of the consistency weight, ``softmax_mse_loss``):
a student trained on a few labels plus a consistency cost towards an exponential moving
average of its own weights, the EMA model fed a differently noised copy of each batch. The EMA
model is a ``copy.deepcopy`` of the student; its outputs and its update run under
``torch.no_grad()``. Data: Gaussian blobs made in the script, 16 labelled points and the rest
unlabelled (label -1, as the repository's ``NO_LABEL``). As published: clean."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--ema-decay", type=float, default=0.95)
parser.add_argument("--consistency", type=float, default=10.0)
parser.add_argument("--rampup", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

NO_LABEL = -1
dim, classes = 6, 3
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (96,))
inputs = centers[labels] + torch.randn(96, dim)
targets = labels.clone()
targets[16:] = NO_LABEL
perm = torch.randperm(96)
batches = list(zip(inputs[perm].split(24), targets[perm].split(24)))


def sigmoid_rampup(current, rampup_length):
    phase = 1.0 - max(0.0, min(current, rampup_length)) / rampup_length
    return float(math.exp(-5.0 * phase * phase))


def softmax_mse_loss(input_logits, target_logits):
    return F.mse_loss(F.softmax(input_logits, dim=1), F.softmax(target_logits, dim=1),
                      reduction="sum") / input_logits.size(1)


def update_ema_variables(model, ema_model, alpha, global_step):
    alpha = min(1 - 1 / (global_step + 1), alpha)
    with torch.no_grad():
        for ema_param, param in zip(ema_model.parameters(), model.parameters()):
            ema_param.mul_(alpha).add_(param, alpha=1 - alpha)


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
ema_model = copy.deepcopy(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)

global_step = 0
for epoch in range(args.epochs):
    for x, target in batches:
        student_input = x + 0.3 * torch.randn_like(x)
        ema_input = x + 0.3 * torch.randn_like(x)
        with torch.no_grad():
            ema_logit = ema_model(ema_input)
        class_logit = model(student_input)
        labeled = target != NO_LABEL
        class_loss = F.cross_entropy(class_logit[labeled], target[labeled], reduction="sum") / len(x)
        weight = args.consistency * sigmoid_rampup(epoch, args.rampup)
        consistency_loss = weight * softmax_mse_loss(class_logit, ema_logit) / len(x)
        loss = class_loss + consistency_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        update_ema_variables(model, ema_model, args.ema_decay, global_step)
    print(f"epoch {epoch} class {class_loss.item():.4f} consistency {consistency_loss.item():.4f}")

with torch.no_grad():
    print("ema accuracy", (ema_model(inputs).argmax(1) == labels).float().mean().item())
if args.out:
    torch.save({"model": model.state_dict(), "ema_model": ema_model.state_dict()}, args.out)
