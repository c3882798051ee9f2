"""A learning rate and a weight decay learned by truncated backpropagation through an unrolled
inner training run, at a tiny size, written after Wu, Ren, Liao and Grosse, "Understanding
Short-Horizon Bias in Stochastic Meta-Optimization" (ICLR 2018, arXiv:1803.02021;
renmengye/meta-optim-public, look_ahead.py, look_ahead_grads, whose accumulated derivatives of
the weights with respect to the hyperparameters are zeroed, ``zero_out``, at the start of each
look-ahead window), with an inner run that grows over meta-training as in Metz,
Maheswaranathan, Nixon, Freeman and Sohl-Dickstein, "Understanding and correcting pathologies
in the training of learned optimizers" (ICML 2019, arXiv:1810.10180). Each meta-iteration
trains a linear regression from zero by ``horizon`` steps of gradient descent with the learned
step size and decay, and the validation loss after them trains the two hyperparameters through
the last ``--window`` inner steps only: the inner weights the earlier steps reach are cut and
made a new leaf (``.detach().requires_grad_()``) before the window. The inner run is the window
alone at first and gains a step every second meta-iteration. The bug twin binds the earlier
steps' weights uncut: the fix is that line. The cut changes nothing while no step comes before
the window: the bug first changes a gradient at meta-iteration 2. Data: random regression tasks
made in the script. ``--out PATH`` saves the two trained hyperparameters. This file: the
published script."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--window", type=int, default=3)
parser.add_argument("--meta-lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

DIM, TRAIN, VALID = 6, 24, 24


def make_task():
    """A linear regression task: training and validation inputs (with a constant feature)."""
    truth = torch.randn(DIM + 1)
    x_train, x_valid = torch.randn(TRAIN, DIM + 1), torch.randn(VALID, DIM + 1)
    x_train[:, -1], x_valid[:, -1] = 1.0, 1.0
    y_train = x_train @ truth + 0.3 * torch.randn(TRAIN)
    y_valid = x_valid @ truth + 0.3 * torch.randn(VALID)
    return (x_train, y_train), (x_valid, y_valid)


def mse(weights, data):
    x, y = data
    return (x @ weights - y).pow(2).mean()


def unroll(weights, steps, data):
    """``steps`` steps of gradient descent on the training loss, differentiable in the
    learned step size and decay."""
    for _ in range(steps):
        grad, = torch.autograd.grad(mse(weights, data), weights, create_graph=True)
        weights = weights - log_lr.exp() * (grad + log_decay.exp() * weights)
    return weights


log_lr = torch.tensor(-2.5, requires_grad=True)
log_decay = torch.tensor(-3.0, requires_grad=True)
optimizer = torch.optim.Adam([log_lr, log_decay], lr=args.meta_lr)
for it in range(args.iters):
    train, valid = make_task()
    horizon = args.window + it // 2
    weights = torch.zeros(DIM + 1, requires_grad=True)
    weights = unroll(weights, horizon - args.window, train).detach().requires_grad_()
    weights = unroll(weights, args.window, train)
    loss = mse(weights, valid)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} horizon {horizon} loss {loss.item():.4f}")

if args.out:
    torch.save({"log_lr": log_lr.detach(), "log_decay": log_decay.detach()}, args.out)
