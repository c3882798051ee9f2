"""Projecting conflicting gradients (PCGrad) at a tiny size, written after Yu, Kumar, Gupta,
Levine, Hausman and Finn, "Gradient Surgery for Multi-Task Learning" (NeurIPS 2020,
arXiv:2001.06782), section 3 and algorithm 1 (each task's gradient g_i, and for every other task
j in random order, when g_i . g_j < 0, g_i is projected onto the normal plane of g_j,
g_i <- g_i - (g_i . g_j) / ||g_j||^2 g_j; the update is the combination of the projected
gradients), with the official tianheyu927/PCGrad (https://github.com/tianheyu927/PCGrad,
PCGrad_tf.py PCGrad.compute_gradients: the flattened per-task gradients, projected against the
original gradients of the other tasks in shuffled order, summed and handed to the wrapped
optimizer's apply_gradients) and the PyTorch port WeiChengTseng/Pytorch-PCGrad
(https://github.com/WeiChengTseng/Pytorch-PCGrad, pcgrad.py PCGrad.pc_backward: _pack_grad
clears the gradients with zero_grad(set_to_none=True) before each objective's
backward(retain_graph=True) and _retrieve_grad clones them, zeros and a has_grad mask for the
parameters a task does not reach; _project_conflicting projects a deep copy of the gradients
against the originals, then averages the shared coordinates and sums the task-specific ones;
_set_grad writes p.grad for every parameter of the wrapped optimizer before its step). A shared
trunk and one head per task, three regression tasks made in the script from a common random
feature map, the third partly opposed to the first, one Adam. Injected bug: the gradients are
cleared once before the tasks' backward passes instead of before each of them
(WeiChengTseng/Pytorch-PCGrad's _pack_grad calls zero_grad(set_to_none=True) before every
objective's backward, and the official PCGrad_tf.py takes each task's gradient of its own loss),
so the k-th task's 'gradient' is the sum of the gradients of the first k tasks: the conflicts
are measured and the projections made on these running sums, the has_grad mask counts the
earlier tasks' heads as reached, and the merged gradient the Adam steps is not PCGrad's."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_tasks, in_dim = 3, 8
feature_map = torch.randn(in_dim, 6)
task_weights = torch.randn(n_tasks, 6)
task_weights[2] = -0.8 * task_weights[0] + 0.6 * torch.randn(6)


def make_batch(n):
    x = torch.randn(n, in_dim)
    features = torch.tanh(x @ feature_map)
    return x, features @ task_weights.t() + 0.1 * torch.randn(n, n_tasks)


class MultiTaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(in_dim, args.hidden), nn.ReLU(),
                                   nn.Linear(args.hidden, args.hidden), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(args.hidden, 1) for _ in range(n_tasks)])

    def forward(self, x):
        z = self.trunk(x)
        return [head(z).squeeze(-1) for head in self.heads]


net = MultiTaskNet()
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
params = [p for group in optimizer.param_groups for p in group["params"]]


def pc_backward(losses):
    """Per-task gradients, projected, written into .grad for the optimizer's step."""
    grads, has_grads = [], []
    optimizer.zero_grad(set_to_none=True)
    for loss in losses:
        loss.backward(retain_graph=True)
        grads.append(torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                                for p in params]))
        has_grads.append(torch.cat([torch.full_like(p, float(p.grad is not None)).flatten()
                                    for p in params]))
    shared = torch.stack(has_grads).prod(0).bool()
    projected = [g.clone() for g in grads]
    for g_i in projected:
        for j in torch.randperm(len(grads)).tolist():
            g_j = grads[j]
            dot = torch.dot(g_i, g_j)
            if dot < 0:
                g_i -= dot * g_j / g_j.norm().pow(2)
    stacked = torch.stack(projected)
    merged = torch.where(shared, stacked.mean(0), stacked.sum(0))
    offset = 0
    for p in params:
        p.grad = merged[offset:offset + p.numel()].view_as(p).clone()
        offset += p.numel()


for step in range(args.steps):
    x, y = make_batch(args.batch_size)
    preds = net(x)
    losses = [F.mse_loss(pred, y[:, k]) for k, pred in enumerate(preds)]
    pc_backward(losses)
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step} losses " + " ".join(f"{loss.item():.4f}" for loss in losses))

if args.out:
    torch.save({"net": net.state_dict()}, args.out)
