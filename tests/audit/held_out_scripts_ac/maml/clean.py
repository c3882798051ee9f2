"""Model-agnostic meta-learning (MAML) for few-shot sinusoid regression, second order.

Paper: Chelsea Finn, Pieter Abbeel and Sergey Levine, "Model-Agnostic Meta-Learning for Fast
Adaptation of Deep Networks", ICML 2017, arXiv:1703.03400.
Reference implementation: cbfinn/maml, maml.py (MAML.construct_model: task_metalearn takes
tf.gradients of the pre-update loss on inputa with respect to the weights, the fast weights are
weights - update_lr * gradients, with second derivatives unless --stop_grad, and the post-update
loss on inputb; total_loss1 and total_losses2 are the sums over the meta-batch divided by
meta_batch_size; pretrain_op is an Adam minimizing total_loss1 and metatrain_op a second Adam
minimizing total_losses2[num_updates - 1]; construct_fc_weights: a 40-40 ReLU network, weights
from a truncated normal with std 0.01 and zero biases), main.py (train: the first
--pretrain_iterations run pretrain_op, the following --metatrain_iterations run metatrain_op)
and data_generator.py (generate_sinusoid_batch: amplitude in [0.1, 5], phase in [0, pi],
inputs in [-5, 5], y = A sin(x - phase)).

Each task is a sinusoid; K = 10 points of a task form the inner-loop (support) set a and
another 10 the query set b. Training runs in two phases with their own loops and their own
Adam optimizers, as main.py does with --pretrain_iterations followed by --metatrain_iterations:
a short pre-training phase minimizes the plain regression loss on the support sets of the
meta-batch, then the meta-training phase runs MAML: for each task the fast weights start as the
network's own parameters, take num_updates plain gradient steps of size update_lr on the
support loss, the gradients taken with create_graph=True so that the meta-gradient includes the
second-order term, and the query loss at the fast weights is averaged over the meta-batch and
back-propagated into the initial parameters, which the meta Adam updates. The final evaluation
adapts to new tasks with ten inner steps and only reports losses.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--pretrain_iterations", type=int, default=15)
parser.add_argument("--metatrain_iterations", type=int, default=30)
parser.add_argument("--meta_batch_size", type=int, default=8)
parser.add_argument("--update_batch_size", type=int, default=10)
parser.add_argument("--num_updates", type=int, default=1)
parser.add_argument("--update_lr", type=float, default=0.01)
parser.add_argument("--meta_lr", type=float, default=1e-3)
parser.add_argument("--dim_hidden", type=int, default=40)
parser.add_argument("--test_num_updates", type=int, default=10)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def generate_sinusoid_batch(batch_size, num_samples):
    amp = 0.1 + 4.9 * torch.rand(batch_size, 1, 1)
    phase = math.pi * torch.rand(batch_size, 1, 1)
    inputs = -5.0 + 10.0 * torch.rand(batch_size, num_samples, 1)
    outputs = amp * torch.sin(inputs - phase)
    return inputs, outputs


def split_support_query(inputs, outputs, k):
    return inputs[:, :k], outputs[:, :k], inputs[:, k:], outputs[:, k:]


class SineNet(nn.Module):
    def __init__(self, dim_hidden):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(1, dim_hidden), nn.Linear(dim_hidden, dim_hidden),
                                     nn.Linear(dim_hidden, 1)])
        for layer in self.layers:
            nn.init.trunc_normal_(layer.weight, std=0.01, a=-0.02, b=0.02)
            nn.init.zeros_(layer.bias)

    def forward(self, x, params=None):
        if params is None:
            params = list(self.parameters())
        h = x
        for i in range(len(self.layers)):
            h = F.linear(h, params[2 * i], params[2 * i + 1])
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h


def adapt(model, x_a, y_a, num_updates):
    fast = list(model.parameters())
    for _ in range(num_updates):
        loss_a = F.mse_loss(model(x_a, fast), y_a)
        grads = torch.autograd.grad(loss_a, fast, create_graph=True)
        fast = [w - args.update_lr * g for w, g in zip(fast, grads)]
    return fast


model = SineNet(args.dim_hidden)
k = args.update_batch_size

# Phase 1: pre-training on the support sets (pretrain_op).
pretrain_optimizer = torch.optim.Adam(model.parameters(), lr=args.meta_lr)
for itr in range(args.pretrain_iterations):
    x, y = generate_sinusoid_batch(args.meta_batch_size, 2 * k)
    x_a, y_a, _, _ = split_support_query(x, y, k)
    pretrain_optimizer.zero_grad()
    total_loss1 = F.mse_loss(model(x_a), y_a)
    total_loss1.backward()
    pretrain_optimizer.step()
    if itr % 5 == 0 or itr == args.pretrain_iterations - 1:
        print(f"pretrain {itr:3d} loss {total_loss1.item():.4f}")

# Phase 2: second-order meta-training (metatrain_op).
meta_optimizer = torch.optim.Adam(model.parameters(), lr=args.meta_lr)
for itr in range(args.metatrain_iterations):
    x, y = generate_sinusoid_batch(args.meta_batch_size, 2 * k)
    x_a, y_a, x_b, y_b = split_support_query(x, y, k)
    meta_optimizer.zero_grad()
    losses_a, losses_b = [], []
    for t in range(args.meta_batch_size):
        fast_weights = adapt(model, x_a[t], y_a[t], args.num_updates)
        losses_a.append(F.mse_loss(model(x_a[t]), y_a[t]))
        losses_b.append(F.mse_loss(model(x_b[t], fast_weights), y_b[t]))
    total_loss1 = torch.stack(losses_a).sum() / args.meta_batch_size
    total_loss2 = torch.stack(losses_b).sum() / args.meta_batch_size
    total_loss2.backward()
    meta_optimizer.step()
    if itr % 10 == 0 or itr == args.metatrain_iterations - 1:
        print(f"metatrain {itr:3d} pre {total_loss1.item():.4f} post {total_loss2.item():.4f}")

# Meta-test: adapt to new tasks with more inner steps; nothing here trains the model.
x, y = generate_sinusoid_batch(args.meta_batch_size, 2 * k)
x_a, y_a, x_b, y_b = split_support_query(x, y, k)
pre, post = 0.0, 0.0
for t in range(args.meta_batch_size):
    fast = list(model.parameters())
    for _ in range(args.test_num_updates):
        grads = torch.autograd.grad(F.mse_loss(model(x_a[t], fast), y_a[t]), fast)
        fast = [w - args.update_lr * g for w, g in zip(fast, grads)]
    with torch.no_grad():
        pre += F.mse_loss(model(x_b[t]), y_b[t]).item() / args.meta_batch_size
        post += F.mse_loss(model(x_b[t], fast), y_b[t]).item() / args.meta_batch_size
print(f"meta-test query mse before {pre:.4f} after {args.test_num_updates} steps {post:.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
