"""SNIP, single-shot pruning at initialisation by connection sensitivity, of a small MLP on a
synthetic classification task, written after Lee, Ajanthan and Torr, "SNIP: Single-shot Network
Pruning based on Connection Sensitivity" (ICLR 2019, arXiv:1810.02340): every weight w_j gets
an indicator c_j in the forward pass (the layer computes (w * c) x + b), the sensitivity of a
connection is the magnitude of the loss's derivative with respect to its indicator at c = 1,
|dL/dc_j| = |w_j dL/dw_j|, on one mini-batch at initialisation, normalised over all layers;
the top kappa of all connections are kept and the rest pruned, once, before any training.
Two phases: the saliency pass at initialisation, then standard training of the pruned
network, in which the masks are fixed (they never train) and pruned weights stay zero. With
mil-ad/snip (https://github.com/mil-ad/snip), snip.py SNIP: it takes one batch, makes a deep
copy of the network so that the saliency pass cannot affect the training phase, gives every
Linear/Conv layer of the copy a weight_mask parameter of ones and a forward that uses
weight * weight_mask, freezes the copy's weights, backpropagates the loss once, takes
|weight_mask.grad|, divides by the sum over all layers, keeps the scores at or above the k-th
largest (k = keep_ratio times the number of weights) and returns the 0/1 keep masks; train.py
apply_prune_mask zeroes the pruned weights and masks their gradients before SGD with momentum
0.9, weight decay 5e-4 and a step learning-rate decay. This script follows those steps with
one difference of form, that of namhoonlee/snip-public (snip/model.py Model.construct_model:
the masks are variables made with trainable=False and multiplied into the weights by
apply_mask in the training forward pass too): the layers carry weight_mask in both phases,
set to the keep mask and frozen for training, so the pruned connections get no gradient and,
zeroed once, stay zero. The data are 20-dimensional inputs of which 8 carry the label (4
classes), so that SNIP has connections it can drop; the network is a 20-64-64-4 ReLU MLP
and 20% of its weights are kept.
Bug: SNIP's saliency pass runs on the network itself, not on a deep copy, so it freezes the
real network's weights (requires_grad_(False)) and phase 2 trains only the biases."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--keep-ratio", type=float, default=0.2)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--lr-decay-step", type=int, default=100)
parser.add_argument("--out", default=None, help="where to save the pruned, trained network")
args = parser.parse_args()
torch.manual_seed(args.seed)

# data: only the first 8 of the 20 input features carry the label
n_train, in_dim, n_informative, n_classes = 2048, 20, 8, 4
x_all = torch.randn(n_train, in_dim)
teacher = torch.randn(n_informative, n_classes)
y_all = (x_all[:, :n_informative] @ teacher + 0.3 * torch.randn(n_train, n_classes)).argmax(1)


class MaskedLinear(nn.Linear):
    """A Linear layer whose weights enter the forward pass as weight * weight_mask."""

    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features)
        self.weight_mask = nn.Parameter(torch.ones_like(self.weight))

    def forward(self, x):
        return F.linear(x, self.weight * self.weight_mask, self.bias)


net = nn.Sequential(MaskedLinear(in_dim, 64), nn.ReLU(), MaskedLinear(64, 64), nn.ReLU(),
                    MaskedLinear(64, n_classes))


def snip(net, keep_ratio, inputs, targets):
    """Connection sensitivity |dL/dc| on one batch; returns the 0/1 keep mask of every layer."""
    layers = [m for m in net.modules() if isinstance(m, MaskedLinear)]
    for layer in layers:
        layer.weight.requires_grad_(False)
    net.zero_grad()
    loss = F.cross_entropy(net(inputs), targets)
    loss.backward()
    grads_abs = [layer.weight_mask.grad.abs() for layer in layers]
    all_scores = torch.cat([g.flatten() for g in grads_abs])
    norm_factor = all_scores.sum()
    num_params_to_keep = int(len(all_scores) * keep_ratio)
    threshold = torch.topk(all_scores / norm_factor, num_params_to_keep, sorted=True)[0][-1]
    return [((g / norm_factor) >= threshold).float() for g in grads_abs]


# phase 1: SNIP at initialisation on a single batch
idx = torch.randperm(n_train)[:args.batch_size]
keep_masks = snip(net, args.keep_ratio, x_all[idx], y_all[idx])
kept = sum(int(m.sum()) for m in keep_masks)
total = sum(m.numel() for m in keep_masks)
print(f"snip kept {kept} of {total} weights")

# phase 2: train the pruned network with the masks fixed
prunable = [m for m in net.modules() if isinstance(m, MaskedLinear)]
for layer, keep_mask in zip(prunable, keep_masks):
    layer.weight_mask.requires_grad_(False)
    with torch.no_grad():
        layer.weight_mask.copy_(keep_mask)
        layer.weight.mul_(keep_mask)

optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_decay_step, gamma=0.1)
for step in range(args.steps):
    idx = torch.randint(0, n_train, (args.batch_size,))
    logits = net(x_all[idx])
    loss = F.cross_entropy(logits, y_all[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 50 == 0:
        accuracy = (logits.argmax(1) == y_all[idx]).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} accuracy {accuracy:.2f}")

if args.out:
    torch.save({"net": net.state_dict()}, args.out)
