"""Population based training at a tiny size, written after Jaderberg, Dalibard, Osindero, Czarnecki,
Donahue, Razavi, Vinyals, Green, Dunning, Simonyan, Fernando and Kavukcuoglu, "Population Based
Training of Neural Networks" (arXiv:1711.09846), section 3 (truncation selection, perturbation),
with the exploit and explore steps of voiler/PopulationBasedTraining
(https://github.com/voiler/PopulationBasedTraining, utils.py exploit_and_explore and main.py): a
population of networks, each with its own SGD optimizer and hyperparameters (learning rate and
momentum), is trained for a few steps per round; the members are then scored on a validation batch
(under torch.no_grad()), each member of the bottom quarter is replaced by a copy of one of the top
quarter (weights, optimizer state and hyperparameters: a copy.deepcopy of the member, so that its
optimizer steps the copied weights), and the copy's hyperparameters are perturbed by a factor 0.8 or
1.2. MLP regressors on a function made in the script. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--population", type=int, default=4)
parser.add_argument("--rounds", type=int, default=4)
parser.add_argument("--ready-steps", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim = 6
true_w = torch.randn(dim, 1)


def batch(n):
    x = torch.randn(n, dim)
    return x, torch.sin(x @ true_w) + 0.1 * torch.randn(n, 1)


def new_member():
    model = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))
    lr = float(10 ** (-2 + 1.5 * torch.rand(())))
    momentum = float(0.5 + 0.45 * torch.rand(()))
    return {"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=lr,
                                                         momentum=momentum)}


def train(member, steps):
    for _ in range(steps):
        x, y = batch(args.batch_size)
        loss = F.mse_loss(member["model"](x), y)
        member["optimizer"].zero_grad()
        loss.backward()
        member["optimizer"].step()
    return loss.item()


@torch.no_grad()
def evaluate(member, x, y):
    return F.mse_loss(member["model"](x), y).item()


def explore(member, perturb_factors=(1.2, 0.8)):
    for group in member["optimizer"].param_groups:
        for name in ("lr", "momentum"):
            group[name] *= perturb_factors[int(torch.randint(0, 2, ()))]
        group["momentum"] = min(group["momentum"], 0.99)


population = [new_member() for _ in range(args.population)]
cut = max(1, args.population // 4)
for round_ in range(args.rounds):
    losses = [train(member, args.ready_steps) for member in population]
    x_val, y_val = batch(128)
    scores = [evaluate(member, x_val, y_val) for member in population]
    print(f"round {round_} train {[f'{v:.3f}' for v in losses]} "
          f"validation {[f'{v:.3f}' for v in scores]}")
    if round_ == args.rounds - 1:
        break
    ranked = sorted(range(len(population)), key=lambda i: scores[i])
    for top, bottom in zip(ranked[:cut], ranked[-cut:]):
        population[bottom] = copy.deepcopy(population[top])
        explore(population[bottom])

if args.out:
    torch.save({f"member{i}": member["model"].state_dict()
                for i, member in enumerate(population)}, args.out)
