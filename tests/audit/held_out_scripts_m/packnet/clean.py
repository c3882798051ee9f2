"""PackNet at a tiny size, written after Mallya and Lazebnik, "PackNet: Adding Multiple Tasks to
a Single Network by Iterative Pruning" (CVPR 2018, arXiv:1711.05769), section 3: the network is
trained on task 1, the smallest half of each layer's weights by magnitude is pruned and the rest
retrained briefly; for task 2 the pruned weights are freed and trained while the weights kept
for task 1 are fixed, the biases are shared and fixed, and each task has its own output head;
at test time a task uses only the weights of its own and earlier tasks. With arunmallya/packnet
(https://github.com/arunmallya/packnet, src/prune.py SparsePruner: pruning_mask, which ranks the
weights of the current task by magnitude; prune, which zeroes the pruned weights; make_grads_zero,
which sets the gradients of the weights not owned by the current task and the biases to zero;
make_pruned_zero; make_finetuning_mask, which hands the pruned weights (mask 0) to the next task;
apply_mask; src/main.py Manager.do_batch, which clears the gradients, backpropagates, calls
make_grads_zero before optimizer.step() and make_pruned_zero after it, and main, which adds the
new task's classifier with model.add_dataset before the SGD optimizer over model.parameters() is
built). Two phases: task 1 (training, pruning and retraining), then task 2 on the freed weights,
each with a fresh SGD with momentum. Two classification tasks labelled by random teacher
networks on the same inputs, made in the script. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40, help="training steps of each task")
parser.add_argument("--retrain-steps", type=int, default=15, help="after pruning task 1")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--prune-perc", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 10, 32, 4
data_x = torch.randn(512, in_dim)
with torch.no_grad():
    data_y = [nn.Sequential(nn.Linear(in_dim, 16), nn.Tanh(), nn.Linear(16, n_classes))(data_x)
              .argmax(dim=1) for _ in range(2)]


class MultiHeadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                                    nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.heads = nn.ModuleList()

    def add_task(self):
        self.heads.append(nn.Linear(hidden_dim, n_classes))

    def forward(self, x, task):
        return self.heads[task - 1](self.shared(x))


net = MultiHeadNet()
linears = [m for m in net.shared if isinstance(m, nn.Linear)]
masks = [torch.ones_like(m.weight, dtype=torch.long) for m in linears]  # owner task, 0 = free


def make_grads_zero(task):
    """Fix every weight not owned by the current task, and the shared biases."""
    for m, mask in zip(linears, masks):
        m.weight.grad[mask.ne(task)] = 0.0
        m.bias.grad.zero_()


@torch.no_grad()
def make_pruned_zero():
    for m, mask in zip(linears, masks):
        m.weight[mask.eq(0)] = 0.0


def accuracy(model, task):
    with torch.no_grad():
        return (model(data_x, task).argmax(1) == data_y[task - 1]).float().mean().item()


def batch(task):
    idx = torch.randint(0, len(data_x), (args.batch_size,))
    return data_x[idx], data_y[task - 1][idx]


# phase 1: task 1 on the whole network, then pruning and retraining of what is kept
net.add_task()
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.steps):
    x, y = batch(1)
    loss = F.cross_entropy(net(x, 1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():  # prune the smallest of the weights task 1 owns (pruning_mask)
    for m, mask in zip(linears, masks):
        owned = m.weight[mask.eq(1)].abs()
        cutoff = owned.kthvalue(round(args.prune_perc * owned.numel())).values
        mask[(m.weight.abs() <= cutoff) & mask.eq(1)] = 0
make_pruned_zero()
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.retrain_steps):
    x, y = batch(1)
    loss = F.cross_entropy(net(x, 1), y)
    optimizer.zero_grad()
    loss.backward()
    make_grads_zero(1)
    optimizer.step()
    make_pruned_zero()
print(f"task 1 pruned and retrained, accuracy {accuracy(net, 1):.3f}")
task1_weights = [m.weight.detach().clone() for m in linears]

# phase 2: task 2 on the freed weights, task 1's weights and the biases fixed
for mask in masks:
    mask[mask.eq(0)] = 2
net.add_task()
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.steps):
    x, y = batch(2)
    loss = F.cross_entropy(net(x, 2), y)
    optimizer.zero_grad()
    loss.backward()
    make_grads_zero(2)
    optimizer.step()
    make_pruned_zero()
    if step % 10 == 0:
        print(f"task 2 step {step} loss {loss.item():.4f}")

task1_net = copy.deepcopy(net)  # task 1 sees only its own weights (apply_mask)
with torch.no_grad():
    for m, mask in zip([m for m in task1_net.shared if isinstance(m, nn.Linear)], masks):
        m.weight[mask.gt(1)] = 0.0
drift = max((m.weight[mask.eq(1)] - w[mask.eq(1)]).abs().max().item()
            for m, mask, w in zip(linears, masks, task1_weights))
print(f"task 1 accuracy {accuracy(task1_net, 1):.3f}, task 2 accuracy {accuracy(net, 2):.3f}, "
      f"drift of task 1's weights {drift:.2e}")

if args.out:
    torch.save({**{k: v.detach().clone() for k, v in net.state_dict().items()},
                **{f"mask{i}": mask.clone() for i, mask in enumerate(masks)}}, args.out)
