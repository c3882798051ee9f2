"""Reducible holdout loss selection (RHO-LOSS) at a tiny size, written after Mindermann et al.,
"Prioritized Training on Points that are Learnable, Worth Learning, and Not Yet Learnt" (ICML
2022, arXiv:2206.07137) and OATML/RHO-Loss (src/curricula/selection_methods.py,
``reducible_loss_selection``; src/models/MultiModels.py, ``training_step``). Two phases: an
irreducible-loss model is trained on a holdout set (its own optimizer), then, at each step of
the target model, the per-point losses of both models on a large batch are computed without
gradient, the points of largest reducible loss (the model's loss minus the irreducible loss)
are selected, and the model is trained by the cross-entropy on them alone. The script prints
the loss and, as a separate number, the mean reducible loss of the selected points, a detached
value never backpropagated. Points made in the script, some with noisy labels. SGD with
momentum in each phase. Clean: the cut values only select the trained points and are printed.
``--out PATH`` saves both models' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--holdout-steps", type=int, default=6)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--selected", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)


def make(n):
    y = torch.randint(0, classes, (n,))
    x = centers[y] + 0.7 * torch.randn(n, dim)
    noisy = torch.rand(n) < 0.2
    return x, torch.where(noisy, torch.randint(0, classes, (n,)), y)


holdout_x, holdout_y = make(64)
train_x, train_y = make(192)

irreducible = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))

holdout_optimizer = torch.optim.SGD(irreducible.parameters(), lr=0.1, momentum=0.9)
for step in range(args.holdout_steps):
    x, y = holdout_x[16 * (step % 4):16 * (step % 4) + 16], holdout_y[16 * (step % 4):][:16]
    loss = F.cross_entropy(irreducible(x), y)
    holdout_optimizer.zero_grad()
    loss.backward()
    holdout_optimizer.step()
    print(f"holdout step {step} loss {loss.item():.4f}")

optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(args.steps):
    x, y = train_x[32 * (step % 6):32 * (step % 6) + 32], train_y[32 * (step % 6):][:32]
    with torch.no_grad():
        irreducible_loss = F.cross_entropy(irreducible(x), y, reduction="none")
        reducible = F.cross_entropy(model(x), y, reduction="none") - irreducible_loss
    selected = reducible.topk(args.selected).indices
    loss = F.cross_entropy(model(x[selected]), y[selected])
    shown = loss.detach() - irreducible_loss[selected].mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} reducible {shown.item():.4f}")

if args.out:
    torch.save({**{f"irreducible.{k}": v for k, v in irreducible.state_dict().items()},
                **{f"model.{k}": v for k, v in model.state_dict().items()}}, args.out)
