"""Iterative magnitude pruning with rewinding at a tiny size, written after Frankle and Carbin,
"The Lottery Ticket Hypothesis: Finding Sparse, Trainable Neural Networks" (ICLR 2019,
arXiv:1803.03635), section 2 (randomly initialise f(x; theta_0), train for j iterations, prune
p% of the remaining weights of each layer by magnitude to make a mask m, reset the remaining
weights to their values in theta_0, and repeat; the output layer pruned at half the rate), with
rahulvigneswaran/Lottery-Ticket-Hypothesis-in-Pytorch
(https://github.com/rahulvigneswaran/Lottery-Ticket-Hypothesis-in-Pytorch, main.py:
initial_state_dict = copy.deepcopy(model.state_dict()) saved before any training,
prune_by_percentile over the surviving weights of each layer, original_initialization, which
writes mask * initial_state_dict[name] back into the weights and the initial biases, and a fresh
Adam for every pruning level) and facebookresearch/open_lth
(https://github.com/facebookresearch/open_lth, pruning/pruned_model.py PrunedModel, which
registers each mask with register_buffer and applies it to the weights before every forward;
pruning/sparse_global.py, the threshold taken over the unpruned weights only), the mask applied
in the forward as weight * weight_mask as in torch.nn.utils.prune. Two phases: the dense network
is trained (round 0), then rounds of pruning, rewinding to theta_0 and retraining the masked
network with a fresh optimizer. A classification task labelled by a random teacher network, made
in the script. Injected bug: theta_0 is kept as net.state_dict() without the copy.deepcopy
(rahulvigneswaran's main.py saves initial_state_dict = copy.deepcopy(model.state_dict()),
open_lth loads the checkpoint saved at the rewind step), and a state_dict holds detached tensors
that share their storage with the parameters, so the saved 'initial' weights follow every SGD
step and the rewind writes the trained weights onto themselves: from the first pruning round the
masked network is fine-tuned from its trained weights instead of retrained from theta_0; second
phase of a two-phase script."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--rounds", type=int, default=3, help="round 0 dense, then prune rounds")
parser.add_argument("--steps", type=int, default=25, help="training steps per round")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--prune-rate", type=float, default=0.2)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, n_classes = 10, 4
teacher = nn.Sequential(nn.Linear(in_dim, 16), nn.Tanh(), nn.Linear(16, n_classes))
data_x = torch.randn(512, in_dim)
with torch.no_grad():
    data_y = teacher(data_x).argmax(-1)


class MaskedLinear(nn.Linear):
    def __init__(self, n_in, n_out):
        super().__init__(n_in, n_out)
        self.register_buffer("weight_mask", torch.ones_like(self.weight))

    def forward(self, x):
        return F.linear(x, self.weight * self.weight_mask, self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([MaskedLinear(in_dim, 32), MaskedLinear(32, 32),
                                     MaskedLinear(32, n_classes)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


@torch.no_grad()
def prune_by_magnitude_(net):
    """Drop the smallest surviving weights of each layer, the output layer at half the rate."""
    for i, layer in enumerate(net.layers):
        rate = args.prune_rate / 2 if i == len(net.layers) - 1 else args.prune_rate
        alive = layer.weight_mask.bool()
        k = int(rate * alive.sum().item())
        threshold = layer.weight[alive].abs().kthvalue(k).values
        layer.weight_mask[layer.weight.abs() <= threshold] = 0.0


@torch.no_grad()
def rewind_(net, state):
    """Reset the weights and biases to theta_0; the masks stay."""
    for i, layer in enumerate(net.layers):
        layer.weight.copy_(state[f"layers.{i}.weight"] * layer.weight_mask)
        layer.bias.copy_(state[f"layers.{i}.bias"])


net = Net()
initial_state = net.state_dict()  # theta_0
for round_ in range(args.rounds):
    if round_ > 0:  # phase 2: prune the trained weights, rewind the survivors, retrain
        prune_by_magnitude_(net)
        rewind_(net, initial_state)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    for step in range(args.steps):
        idx = torch.randint(0, len(data_x), (args.batch_size,))
        loss = F.cross_entropy(net(data_x[idx]), data_y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        accuracy = (net(data_x).argmax(-1) == data_y).float().mean().item()
        density = [layer.weight_mask.mean().item() for layer in net.layers]
    print(f"round {round_} loss {loss.item():.4f} accuracy {accuracy:.3f} "
          f"density " + " ".join(f"{d:.2f}" for d in density))

if args.out:
    torch.save({"net": net.state_dict()}, args.out)
