"""Learning from Failure at a tiny size, written after Nam, Cha, Ahn, Lee and Shin, "Learning
from Failure: Training Debiased Classifier from Biased Classifier" (NeurIPS 2020,
arXiv:2007.02561) and alinlab/LfF (train.py, the joint training loop; module/loss.py,
``GeneralizedCELoss``; util.py, ``EMA``): a biased model trained by the generalized
cross-entropy, the cross-entropy weighted by ``p_y ** q * q`` of its own detached probability,
and a debiased model trained by the cross-entropy weighted per sample by the relative
difficulty ``ema_b / (ema_b + ema_d)``, from moving averages of both models' detached
per-sample losses, normalised by the largest of each class. Points made in the script: a weak
class signal and a strong bias feature that agrees with the class for most points. Adam over
both models, one backward of the summed losses. Clean: the cut values only weight trained
terms. ``--out PATH`` saves both models' weights and the moving averages."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--q", type=float, default=0.7)
parser.add_argument("--ema", type=float, default=0.7)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, size = 6, 2, 128
labels = torch.randint(0, classes, (size,))
bias = torch.where(torch.rand(size) < 0.9, labels, 1 - labels)
signal = torch.randn(classes, dim)[labels] + torch.randn(size, dim)
points = torch.cat([signal, 3.0 * F.one_hot(bias, classes).float()], 1)

model_b = nn.Sequential(nn.Linear(dim + classes, 16), nn.ReLU(), nn.Linear(16, classes))
model_d = nn.Sequential(nn.Linear(dim + classes, 16), nn.ReLU(), nn.Linear(16, classes))
optimizer = torch.optim.Adam([*model_b.parameters(), *model_d.parameters()], lr=0.01)
ema_b, ema_d = torch.zeros(size), torch.zeros(size)


def generalized_ce(logits, targets):
    p_y = F.softmax(logits, dim=1).gather(1, targets[:, None]).squeeze(1)
    weight = p_y.detach() ** args.q * args.q
    return F.cross_entropy(logits, targets, reduction="none") * weight


for step in range(args.steps):
    index = torch.randperm(size)[:32]
    x, y = points[index], labels[index]
    logit_b, logit_d = model_b(x), model_d(x)
    loss_b = F.cross_entropy(logit_b, y, reduction="none").detach()
    loss_d = F.cross_entropy(logit_d, y, reduction="none").detach()
    ema_b[index] = args.ema * ema_b[index] + (1 - args.ema) * loss_b
    ema_d[index] = args.ema * ema_d[index] + (1 - args.ema) * loss_d
    norm_b, norm_d = ema_b[index].clone(), ema_d[index].clone()
    for c in range(classes):
        norm_b[y == c] /= ema_b[labels == c].max()
        norm_d[y == c] /= ema_d[labels == c].max()
    loss_weight = norm_b / (norm_b + norm_d + 1e-8)
    loss_b_update = generalized_ce(logit_b, y)
    loss_d_update = F.cross_entropy(logit_d, y, reduction="none") * loss_weight
    loss = loss_b_update.mean() + loss_d_update.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"model_b.{k}": v for k, v in model_b.state_dict().items()},
                **{f"model_d.{k}": v for k, v in model_d.state_dict().items()},
                "ema_b": ema_b, "ema_d": ema_d}, args.out)
