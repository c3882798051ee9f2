"""GradNorm at a tiny size, written after Chen, Badrinarayanan, Lee and Rabinovich, "GradNorm:
Gradient Normalization for Adaptive Loss Balancing in Deep Multitask Networks" (ICML 2018,
arXiv:1711.02257), section 3 and its toy regression (section 4), with the training loop of
brianlan/pytorch-grad-norm (https://github.com/brianlan/pytorch-grad-norm, train.py and model.py):
the task weights ``w_i`` are a parameter of the model, held by the one optimizer; the weighted sum
of the task losses is backpropagated (keeping its graph) and the weights' own gradient is then
replaced by that of the GradNorm loss, ``sum_i |G_i - mean(G) * r_i ** alpha|``, where ``G_i`` is
the norm of the gradient of ``w_i L_i`` on the last shared layer and ``r_i`` the task's relative
inverse training rate; the target ``mean(G) * r_i ** alpha`` is a constant (computed from numpy
values in the reference); after each step the weights are renormalised to sum to the number of
tasks. Three tasks ``sigma_i * tanh((B + eps_i) x)`` of different scales, made in the script.
Injected bug: the GradNorm target is not cut from the graph, so the gradient of the GradNorm loss on
the task weights also runs through the mean gradient norm inside the target, pulling the target
towards the norms as well as the norms towards the target."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--alpha", type=float, default=0.12)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim_in, dim_out, hidden, n_samples = 16, 8, 32, 64
sigmas = [1.0, 4.0, 12.0]
n_tasks = len(sigmas)
B = torch.randn(dim_out, dim_in)
epsilons = 0.35 * torch.randn(n_tasks, dim_out, dim_in)
x_train = torch.rand(n_samples, dim_in) * 2 - 1
targets = torch.stack([s * torch.tanh(x_train @ (B + e).t()) for s, e in zip(sigmas, epsilons)], 1)


class RegressionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(dim_in, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.task_heads = nn.ModuleList([nn.Linear(hidden, dim_out) for _ in range(n_tasks)])

    def forward(self, x):
        h = self.trunk(x)
        return torch.stack([head(h) for head in self.task_heads], 1)

    def get_last_shared_layer(self):
        return self.trunk[4]


class RegressionTrain(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.weights = nn.Parameter(torch.ones(n_tasks))

    def forward(self, x, ts):
        ys = self.model(x)
        return torch.stack([F.mse_loss(ys[:, i], ts[:, i]) for i in range(n_tasks)])


model = RegressionTrain(RegressionModel())
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for t in range(args.steps):
    task_loss = model(x_train, targets)
    weighted_task_loss = model.weights * task_loss
    if t == 0:
        initial_task_loss = task_loss.detach()
    loss = weighted_task_loss.sum()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    model.weights.grad = torch.zeros_like(model.weights)

    W = model.model.get_last_shared_layer()
    norms = []
    for i in range(n_tasks):
        gygw = torch.autograd.grad(task_loss[i], W.parameters(), retain_graph=True)
        norms.append(torch.norm(model.weights[i] * gygw[0]))
    norms = torch.stack(norms)
    loss_ratio = task_loss.detach() / initial_task_loss
    inverse_train_rate = loss_ratio / loss_ratio.mean()
    constant_term = norms.mean() * inverse_train_rate ** args.alpha
    grad_norm_loss = torch.abs(norms - constant_term).sum()
    model.weights.grad = torch.autograd.grad(grad_norm_loss, model.weights)[0]
    optimizer.step()

    with torch.no_grad():
        model.weights.mul_(n_tasks / model.weights.sum())
    print(f"step {t} task losses {[f'{v:.3f}' for v in task_loss.tolist()]} "
          f"weights {[f'{v:.3f}' for v in model.weights.tolist()]}")

if args.out:
    torch.save(model.state_dict(), args.out)
