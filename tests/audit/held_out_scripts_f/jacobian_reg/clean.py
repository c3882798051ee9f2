"""Jacobian regularization at a tiny size, written after Hoffman, Roberts and Yaida, "Robust
Learning with Jacobian Regularization" (arXiv:1908.02729, 2019), Algorithm 1, with
facebookresearch/jacobian_regularizer (https://github.com/facebookresearch/jacobian_regularizer,
jacobian/jacobian.py JacobianReg and examples/mnist.py): the input requires gradients, and the
squared Frobenius norm of the input-output Jacobian is estimated with random projections, each a
vector-Jacobian product taken by torch.autograd.grad with ``create_graph=True`` so that the penalty
is itself differentiable and trains the network; the loss is the cross-entropy plus ``lambda_JR``
times the penalty, with SGD and weight decay. An MLP classifier on vectors of a few classes made in
the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lambda-jr", type=float, default=0.5)
parser.add_argument("--n-proj", type=int, default=1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 16, 5
means = 1.5 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class JacobianReg(nn.Module):
    """(1/2) tr |dy/dx|^2, estimated with ``n`` random projections."""

    def __init__(self, n=1):
        super().__init__()
        self.n = n

    def forward(self, x, y):
        B, C = y.shape
        J2 = 0
        for _ in range(self.n):
            v = self._random_vector(C=C, B=B)
            Jv = self._jacobian_vector_product(y, x, v, create_graph=True)
            J2 += C * torch.norm(Jv) ** 2 / (self.n * B)
        return 0.5 * J2

    def _random_vector(self, C, B):
        v = torch.randn(B, C)
        return v / torch.norm(v, 2, 1, True)

    def _jacobian_vector_product(self, y, x, v, create_graph=False):
        flat_y, flat_v = y.reshape(-1), v.reshape(-1)
        grad_x, = torch.autograd.grad(flat_y, x, flat_v, retain_graph=True,
                                      create_graph=create_graph)
        return grad_x


model = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                      nn.Linear(64, classes))
reg = JacobianReg(n=args.n_proj)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
for step in range(args.steps):
    data, target = batch(args.batch_size)
    data.requires_grad = True
    optimizer.zero_grad()
    output = model(data)
    loss_super = F.cross_entropy(output, target)
    loss_JR = reg(data, output)
    loss = loss_super + args.lambda_jr * loss_JR
    loss.backward()
    optimizer.step()
    print(f"step {step} cross-entropy {loss_super.item():.4f} jacobian {loss_JR.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
