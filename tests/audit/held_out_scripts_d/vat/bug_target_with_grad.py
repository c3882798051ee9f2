"""Virtual adversarial training at a tiny size, written after Miyato, Maeda, Koyama and Ishii,
"Virtual Adversarial Training: A Regularization Method for Supervised and Semi-Supervised
Learning" (IEEE TPAMI 2018), with the loss of the authors' code takerum/vat_tf
(https://github.com/takerum/vat_tf, vat.py, virtual_adversarial_loss): the current prediction
``p(y | x)`` on the unlabelled inputs is the fixed target (stop_gradient there, computed under
torch.no_grad() here), one power iteration finds the direction ``r_adv`` to which it is most
sensitive, and ``KL(p(y | x) || p(y | x + r_adv))`` is added to the supervised cross-entropy. Two
phases: a short supervised warm-up on the few labelled inputs, then semi-supervised training with
the VAT term. An MLP classifier on vectors made in the script. Injected bug: the target prediction
is computed in vat_loss without torch.no_grad(), so in the second phase the VAT term also trains
the model through its own target, pulling the clean prediction towards the perturbed one."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--eps", type=float, default=1.5)
parser.add_argument("--xi", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 3
means = 0.8 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


def l2_normalize(d):
    return d / (d.flatten(1).norm(dim=1).view(-1, *([1] * (d.dim() - 1))) + 1e-8)


def vat_loss(model, x, xi, eps, power_iterations=1):
    prob = F.softmax(model(x), dim=1)
    d = l2_normalize(torch.randn_like(x))
    for _ in range(power_iterations):
        d.requires_grad_()
        dist = F.kl_div(F.log_softmax(model(x + xi * d), dim=1), prob, reduction="batchmean")
        d = l2_normalize(torch.autograd.grad(dist, d)[0])
    r_adv = eps * d
    return F.kl_div(F.log_softmax(model(x + r_adv), dim=1), prob, reduction="batchmean")


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
x_labelled, y_labelled = batch(12)

# phase 1: supervised warm-up on the labelled inputs
for step in range(args.warmup_steps):
    loss = F.cross_entropy(model(x_labelled), y_labelled)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.4f}")

# phase 2: the VAT term on unlabelled inputs
for step in range(args.steps):
    x_unlabelled, _ = batch(args.batch_size)
    sup = F.cross_entropy(model(x_labelled), y_labelled)
    vat = vat_loss(model, x_unlabelled, args.xi, args.eps)
    loss = sup + vat
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} sup {sup.item():.4f} vat {vat.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
