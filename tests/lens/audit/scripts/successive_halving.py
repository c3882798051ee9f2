"""Successive halving at a tiny size, written after Jamieson and Talwalkar, "Non-stochastic Best
Arm Identification and Hyperparameter Optimization" (AISTATS 2016, arXiv:1502.07943) and the
inner loop of Hyperband (Li, Jamieson, DeSalvo, Rostamizadeh and Talwalkar, JMLR 2018,
arXiv:1603.06560; zygmuntz/hyperband, hyperband.py): a set of configurations, each a shallow
copy of a base dict of hyperparameters with its own learning rate and momentum, each trial a
network with its own SGD optimizer; every rung trains the surviving trials for a budget of
steps, scores them on a validation batch, keeps the better half and doubles the budget. The
rung's options are a shallow copy of the script's arguments with the budget set, and the cut
is read from a sorted shallow copy of the scores (the scores keep the trials' order). MLP
regressors on a function made in the script.
As published: clean. Every ``copy.copy`` copies numbers (a dict, a namespace, a list); no copy
holds a network. ``--out PATH`` saves every trial's weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--trials", type=int, default=6)
parser.add_argument("--rungs", type=int, default=3)
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim = 5
true_w = torch.randn(dim, 1)


def batch(n):
    x = torch.randn(n, dim)
    return x, torch.sin(2 * x @ true_w) + 0.05 * torch.randn(n, 1)


base = {"lr": 0.05, "momentum": 0.0, "weight_decay": 1e-4}
trials = []
for _ in range(args.trials):
    config = copy.copy(base)
    config["lr"] = float(10 ** (-2.5 + 2 * torch.rand(())))
    config["momentum"] = [0.0, 0.5, 0.9][int(torch.randint(0, 3, ()))]
    net = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))
    trials.append({"config": config, "net": net,
                   "optimizer": torch.optim.SGD(net.parameters(), **config)})


def train(trial, options):
    for _ in range(options.steps):
        x, y = batch(options.batch_size)
        loss = F.mse_loss(trial["net"](x), y)
        trial["optimizer"].zero_grad()
        loss.backward()
        trial["optimizer"].step()


@torch.no_grad()
def score(trial, x, y):
    return F.mse_loss(trial["net"](x), y).item()


alive = list(range(args.trials))
for rung in range(args.rungs):
    options = copy.copy(args)
    options.steps = args.steps * 2**rung
    for i in alive:
        train(trials[i], options)
    x_val, y_val = batch(128)
    scores = [score(trials[i], x_val, y_val) for i in alive]
    ranked = copy.copy(scores)
    ranked.sort()
    cut = ranked[max(1, len(ranked) // 2) - 1]
    print(f"rung {rung} budget {options.steps} scores {[f'{s:.3f}' for s in scores]}")
    alive = [i for i, s in zip(alive, scores) if s <= cut]
print(f"best trial {alive[0]}: {trials[alive[0]]['config']}")

if args.out:
    torch.save({f"trial{i}": trial["net"].state_dict() for i, trial in enumerate(trials)},
               args.out)
