"""FixMatch semi-supervised classification on synthetic Gaussian clusters.

Paper: Kihyuk Sohn, David Berthelot, Chun-Liang Li, Zizhao Zhang, Nicholas Carlini, Ekin D. Cubuk,
Alex Kurakin, Han Zhang and Colin Raffel, "FixMatch: Simplifying Semi-Supervised Learning with
Consistency and Confidence", arXiv:2001.07685, NeurIPS 2020.
Reference implementation: kekmodel/FixMatch-pytorch, train.py (main: SGD with Nesterov momentum
and weight decay on all but the biases, get_cosine_schedule_with_warmup, ModelEMA, one
model.zero_grad() before the epoch loop; train: one forward over
torch.cat((inputs_x, inputs_u_w, inputs_u_s)), Lx = cross-entropy on the labeled logits,
pseudo_label = softmax(logits_u_w.detach_()), mask = max_probs.ge(threshold),
Lu = (cross_entropy(logits_u_s, targets_u, reduction='none') * mask).mean(),
loss = Lx + lambda_u * Lu, backward, optimizer.step(), scheduler.step(), ema_model.update(model),
model.zero_grad()) and models/ema.py (ModelEMA: a deepcopy with requires_grad_(False), updated
under torch.no_grad() as decay * ema + (1 - decay) * model). The TensorFlow original is
google-research/fixmatch, fixmatch.py (FixMatch.model: tf.stop_gradient on the weak logits).

Data: three classes of 8-d Gaussian clusters; only four labeled points per class and a pool of
unlabeled points. The weak augmentation adds small Gaussian jitter (the flip-and-shift analogue);
the strong augmentation scales each point by a random factor, zeroes a random contiguous block
of three features (the Cutout analogue of RandAugment + Cutout) and adds larger noise. The
classifier is a small MLP without batch norm, so the single concatenated forward needs no
interleaving. Each step: one labeled batch (all 12 points) and mu * 12 unlabeled points, each in
a weak and a strong view; the EMA model is what is evaluated.
Bug: model.zero_grad() is called only once before the loop and not after each update, so
from the second step on the gradients of all earlier steps accumulate into every SGD step.
"""
import argparse
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--n_classes", type=int, default=3)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--n_labeled_per_class", type=int, default=4)
parser.add_argument("--n_unlabeled", type=int, default=600)
parser.add_argument("--mu", type=int, default=4)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--wdecay", type=float, default=5e-4)
parser.add_argument("--threshold", type=float, default=0.95)
parser.add_argument("--lambda_u", type=float, default=1.0)
parser.add_argument("--T", type=float, default=1.0)
parser.add_argument("--ema_decay", type=float, default=0.9)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

means = 2.5 * torch.randn(args.n_classes, args.dim)


def sample(labels):
    return means[labels] + torch.randn(len(labels), args.dim)


def weak_augment(x):
    return x + 0.1 * torch.randn_like(x)


def strong_augment(x):
    scale = 1.0 + 0.4 * (torch.rand(x.size(0), 1) - 0.5)
    start = torch.randint(0, x.size(1) - 2, (x.size(0), 1))
    cols = torch.arange(x.size(1)).unsqueeze(0)
    keep = ((cols < start) | (cols >= start + 3)).float()
    return scale * x * keep + 0.5 * torch.randn_like(x)


class MLP(nn.Module):
    def __init__(self, dim, hidden, n_classes):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)


class ModelEMA:
    def __init__(self, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            msd = model.state_dict()
            for k, ema_v in self.ema.state_dict().items():
                ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * msd[k].detach())


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps,
                                    num_cycles=7.0 / 16.0):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        no_progress = float(current_step - num_warmup_steps) / \
            float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, math.cos(math.pi * num_cycles * no_progress))
    return LambdaLR(optimizer, _lr_lambda)


y_labeled = torch.arange(args.n_classes).repeat_interleave(args.n_labeled_per_class)
x_labeled = sample(y_labeled)
x_unlabeled = sample(torch.randint(0, args.n_classes, (args.n_unlabeled,)))
y_test = torch.randint(0, args.n_classes, (300,))
x_test = sample(y_test)

model = MLP(args.dim, args.hidden, args.n_classes)
no_decay = ["bias"]
grouped_parameters = [
    {"params": [p for n, p in model.named_parameters()
                if not any(nd in n for nd in no_decay)], "weight_decay": args.wdecay},
    {"params": [p for n, p in model.named_parameters()
                if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
]
optimizer = torch.optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=True)
scheduler = get_cosine_schedule_with_warmup(optimizer, 0, args.steps)
ema_model = ModelEMA(model, args.ema_decay)

batch_size = len(y_labeled)
n_u = args.mu * batch_size
model.zero_grad()
model.train()
for step in range(args.steps):
    perm_x = torch.randperm(batch_size)
    inputs_x, targets_x = weak_augment(x_labeled[perm_x]), y_labeled[perm_x]
    idx_u = torch.randint(0, args.n_unlabeled, (n_u,))
    inputs_u_w = weak_augment(x_unlabeled[idx_u])
    inputs_u_s = strong_augment(x_unlabeled[idx_u])

    inputs = torch.cat((inputs_x, inputs_u_w, inputs_u_s))
    logits = model(inputs)
    logits_x = logits[:batch_size]
    logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
    del logits

    Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")

    pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
    max_probs, targets_u = torch.max(pseudo_label, dim=-1)
    mask = max_probs.ge(args.threshold).float()

    Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
    loss = Lx + args.lambda_u * Lu
    loss.backward()

    optimizer.step()
    scheduler.step()
    ema_model.update(model)

    if step % 15 == 0 or step == args.steps - 1:
        print(f"step {step:3d} loss {loss.item():.4f} Lx {Lx.item():.4f} "
              f"Lu {Lu.item():.4f} mask {mask.mean().item():.2f}")

with torch.no_grad():
    test_acc = (ema_model.ema(x_test).argmax(1) == y_test).float().mean()
print(f"ema test acc {test_acc.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "ema": ema_model.ema.state_dict()}, args.out)
