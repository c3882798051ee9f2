"""Deep ensembles at a tiny size, written after Lakshminarayanan, Pritzel and Blundell, "Simple and
Scalable Predictive Uncertainty Estimation using Deep Ensembles" (NeurIPS 2017, arXiv:1612.01474),
Algorithm 1 and the toy regression of its Figure 1, with the adversarial training loop of
TorchEnsemble-Community/Ensemble-Pytorch
(https://github.com/TorchEnsemble-Community/Ensemble-Pytorch,
torchensemble/adversarial_training.py _parallel_fit_per_epoch and _get_fgsm_samples): ``M``
networks, each made on its own (its own random initialisation) and each with its own optimizer,
predict a mean and a variance and are trained on the Gaussian negative log-likelihood of the data
plus that of fast-gradient-sign adversarial examples (the input gradient taken by a first backward,
the parameters' gradients cleared after it). Twenty points of the cubic ``y = x^3 + noise``, made in
the script. Injected bug: the members are made by multiplying a list that holds one network by the
number of members (for a new network per member), so every entry is the same network: from the
second member's first step on, each member's optimizer steps that one network again, once per member
and step, with an Adam state of its own."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--members", type=int, default=3)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--epsilon", type=float, default=0.08)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_train = 8 * torch.rand(20, 1) - 4
y_train = (x_train ** 3 + 3 * torch.randn(20, 1)) / 30


class GaussianMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 50), nn.ReLU(), nn.Linear(50, 2))

    def forward(self, x):
        mean, raw_variance = self.net(x).chunk(2, dim=-1)
        return mean, F.softplus(raw_variance) + 1e-6


def gaussian_nll(output, y):
    mean, variance = output
    return (0.5 * torch.log(variance) + 0.5 * (y - mean) ** 2 / variance).mean()


estimators = [GaussianMLP()] * args.members
optimizers = [torch.optim.Adam(estimator.parameters(), lr=0.02) for estimator in estimators]
for step in range(args.steps):
    losses = []
    for estimator, optimizer in zip(estimators, optimizers):
        data = x_train.clone().requires_grad_(True)
        _loss = gaussian_nll(estimator(data), y_train)
        _loss.backward()
        adv_data = x_train + args.epsilon * data.grad.sign()
        optimizer.zero_grad()
        loss = (gaussian_nll(estimator(x_train), y_train)
                + gaussian_nll(estimator(adv_data), y_train))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print(f"step {step} losses {[f'{v:.4f}' for v in losses]}")

if args.out:
    torch.save({f"member{i}": estimator.state_dict() for i, estimator in enumerate(estimators)},
               args.out)
