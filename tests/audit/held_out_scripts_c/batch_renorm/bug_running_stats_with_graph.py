"""Batch Renormalization at a tiny size, written after Ioffe, "Batch Renormalization: Towards
Reducing Minibatch Dependence in Batch-Normalized Models" (arXiv:1702.03275), Algorithm 1: in
training, the minibatch mean and standard deviation normalise the activations, corrected by
``r = clip(sigma_B / sigma)`` and ``d = clip((mu_B - mu) / sigma)`` which are treated as constants
(stop_gradient), and the moving averages ``mu`` and ``sigma`` are updated from the minibatch
statistics outside the gradient computation. Two phases, as the paper trains: first plain batch
normalisation (``r_max = 1``, ``d_max = 0``), then the corrections relaxed (``r_max = 3``,
``d_max = 5``). An MLP classifier on vectors made in the script. Injected bug: the
``@torch.no_grad()`` on ``update_stats`` left out, so the moving averages are assigned with the
graph of every earlier minibatch; ``backward(retain_graph=True)`` then lets the runs go on, and
once ``r`` and ``d`` are no longer clipped to 1 and 0 the loss trains the earlier minibatches'
statistics through them."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=8)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--momentum", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 3
centers = 2.0 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return centers[y] + torch.randn(n, dim), y


class BatchRenorm1d(nn.Module):
    def __init__(self, num_features, momentum, eps=1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.r_max, self.d_max = 1.0, 0.0
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_std", torch.ones(num_features))

    def update_stats(self, mean, std):
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
        self.running_std = (1 - self.momentum) * self.running_std + self.momentum * std

    def forward(self, x):
        if not self.training:
            x_hat = (x - self.running_mean) / self.running_std
            return self.weight * x_hat + self.bias
        mean = x.mean(0)
        std = (x.var(0, unbiased=False) + self.eps).sqrt()
        r = (std.detach() / self.running_std).clamp(1 / self.r_max, self.r_max)
        d = ((mean.detach() - self.running_mean) / self.running_std).clamp(-self.d_max,
                                                                            self.d_max)
        x_hat = (x - mean) / std * r + d
        self.update_stats(mean, std)
        return self.weight * x_hat + self.bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(dim, 32)
        self.brn = BatchRenorm1d(32, args.momentum)
        self.fc2 = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.brn(self.fc1(x))))


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
model.train()

# phase 1: plain batch normalisation (r = 1, d = 0)
for step in range(args.warmup_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.4f}")

# phase 2: batch renormalisation, the corrections relaxed
model.brn.r_max, model.brn.d_max = 3.0, 5.0
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
