"""A capsule network with dynamic routing at a tiny size, written after Sabour, Frosst and Hinton,
"Dynamic Routing Between Capsules" (NIPS 2017, arXiv:1710.09829), Procedure 1, with the routing of
naturomics/CapsNet-Tensorflow (https://github.com/naturomics/CapsNet-Tensorflow, capsLayer.py): the
prediction vectors ``u_hat = W_ij u_i`` of the primary capsules are computed once; the
routing-by-agreement iterations that only refine the coupling logits read a copy of them cut from
the graph (``u_hat_stopped``, tf.stop_gradient there, .detach() here), and only the last iteration
weights the prediction vectors themselves, so the loss trains ``W`` through the last iteration
alone. The margin loss on the output capsules' lengths plus a small reconstruction loss from the
capsule of the true class. Primary capsules from an MLP on vectors made in the script. As published:
clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--routing-iters", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 16, 4
num_primary, primary_dim, digit_dim = 8, 4, 6
means = 1.5 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


def squash(s, eps=1e-8):
    squared_norm = s.pow(2).sum(-1, keepdim=True)
    return squared_norm / (1 + squared_norm) * s / (squared_norm + eps).sqrt()


class CapsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.primary = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(),
                                     nn.Linear(32, num_primary * primary_dim))
        self.W = nn.Parameter(0.1 * torch.randn(num_primary, classes, digit_dim, primary_dim))
        self.decoder = nn.Sequential(nn.Linear(classes * digit_dim, 32), nn.ReLU(),
                                     nn.Linear(32, dim))

    def routing(self, u_hat):
        u_hat_stopped = u_hat.detach()
        b = torch.zeros(u_hat.shape[0], num_primary, classes, 1)
        for r in range(args.routing_iters):
            c = F.softmax(b, dim=2)
            if r == args.routing_iters - 1:
                v = squash((c * u_hat).sum(1))
            else:
                v = squash((c * u_hat_stopped).sum(1))
                b = b + (u_hat_stopped * v.unsqueeze(1)).sum(-1, keepdim=True)
        return v

    def forward(self, x):
        u = squash(self.primary(x).view(-1, num_primary, primary_dim))
        u_hat = torch.einsum("icdp,bip->bicd", self.W, u)
        return self.routing(u_hat)


def margin_loss(lengths, y, m_plus=0.9, m_minus=0.1, lam=0.5):
    t = F.one_hot(y, classes).float()
    loss = t * F.relu(m_plus - lengths).pow(2) + lam * (1 - t) * F.relu(lengths - m_minus).pow(2)
    return loss.sum(1).mean()


model = CapsNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    v = model(x)
    lengths = v.norm(dim=-1)
    masked = (v * F.one_hot(y, classes).unsqueeze(-1)).flatten(1)
    reconstruction = model.decoder(masked)
    loss = margin_loss(lengths, y) + 0.02 * (reconstruction - x).pow(2).sum(1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
