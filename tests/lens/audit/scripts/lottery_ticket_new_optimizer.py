"""One round of the lottery-ticket procedure at a tiny size, written after Frankle and Carbin,
"The Lottery Ticket Hypothesis: Finding Sparse, Trainable Neural Networks" (ICLR 2019,
arXiv:1803.03635; facebookresearch/open_lth, where each round of training builds its own
optimizer). Two phases: a dense MLP is trained, then the smallest-magnitude half of each hidden
layer's weights is pruned, layer by layer, and every survivor is rewound to its value at
initialisation (the biases and the dense output layer too); then the sparse network is
retrained from there, each pruned weight's gradient masked to zero after every backward. The
rewind sets each hidden layer's weight by a new parameter, ``layer.weight =
nn.Parameter(...)``, and a NEW optimizer (SGD with momentum, as in each phase) is built right
after it, from ``model.parameters()``: the optimizer that steps the retraining holds the live
tensors, and the first one is never stepped again. Correct. Data: a random linear teacher's
labels, made in the script. ``--out PATH`` saves the network's weights and the masks."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--train-steps", type=int, default=30, help="the dense phase")
parser.add_argument("--steps", type=int, default=30, help="the retraining of the ticket")
parser.add_argument("--prune-rate", type=float, default=0.5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 20, 4
teacher = torch.randn(dim, classes)


def batch(n):
    x = torch.randn(n, dim)
    return x, (x @ teacher + 0.1 * torch.randn(n, classes)).argmax(dim=1)


class MLP(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def magnitude_mask(weight, rate):
    """1 where ``|weight|`` is above the layer's ``rate`` quantile of magnitudes, else 0."""
    k = max(1, int(rate * weight.numel()))
    threshold = weight.abs().flatten().kthvalue(k).values
    return (weight.abs() > threshold).float()


model = MLP()
initial = copy.deepcopy(model.state_dict())
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

# the dense network
for step in range(args.train_steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"dense {step} loss {loss.item():.4f}")

# prune each hidden layer by magnitude and rewind what survives to its initial value
masks = {}
for name in ("fc1", "fc2"):
    layer = getattr(model, name)
    masks[name] = magnitude_mask(layer.weight.detach(), args.prune_rate)
    layer.weight = nn.Parameter(initial[f"{name}.weight"] * masks[name])
    layer.bias.data.copy_(initial[f"{name}.bias"])
model.fc3.load_state_dict({"weight": initial["fc3.weight"], "bias": initial["fc3.bias"]})
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

# the ticket, retrained from its initial weights with the pruned ones held at zero
for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    for name, mask in masks.items():
        getattr(model, name).weight.grad.mul_(mask)
    optimizer.step()
    print(f"ticket {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "masks": masks}, args.out)
