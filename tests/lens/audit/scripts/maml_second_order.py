"""MAML with its second-order meta-gradient, on sine regression at a tiny size, after Finn,
Abbeel and Levine, "Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks" (ICML
2017, arXiv:1703.03400, Algorithm 2 and Section 5.1; cbfinn/maml, and the PyTorch port
dragen1860/MAML-Pytorch, whose inner steps keep their graph). For each task of a meta-batch
(a sine of random amplitude and phase), the network's weights are adapted by ``--inner-steps``
steps of gradient descent on the task's support points, each step's gradient taken with
``create_graph=True``, and the adapted weights' loss on the task's query points steps the
initial weights. The meta-gradient is meant to pass through every inner step and through the
inner gradients themselves (the second-order term the paper's full MAML keeps; cutting an
inner step would make it first-order MAML or a truncation, another method): the loss trains the
network through every iteration of the inner loop on purpose, no finding. Data: sines made in
the script. ``--out PATH`` saves the network's initial (meta-learned) weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--inner-steps", type=int, default=3)
parser.add_argument("--inner-lr", type=float, default=0.01)
parser.add_argument("--tasks", type=int, default=4)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

SHOTS = 10


def task():
    amplitude, phase = 0.1 + 4.9 * torch.rand(()), 3.1416 * torch.rand(())

    def points(n):
        x = 10 * torch.rand(n, 1) - 5
        return x, amplitude * torch.sin(x + phase)
    return points(SHOTS), points(SHOTS)


net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)

for step in range(args.steps):
    meta_loss = 0.0
    for _ in range(args.tasks):
        (xs, ys), (xq, yq) = task()
        fast = dict(net.named_parameters())
        for _ in range(args.inner_steps):
            inner = F.mse_loss(functional_call(net, fast, (xs,)), ys)
            grads = torch.autograd.grad(inner, list(fast.values()), create_graph=True)
            fast = {k: p - args.inner_lr * g for (k, p), g in zip(fast.items(), grads)}
        meta_loss = meta_loss + F.mse_loss(functional_call(net, fast, (xq,)), yq) / args.tasks
    optimizer.zero_grad()
    meta_loss.backward()
    optimizer.step()
    print(f"step {step} meta-loss {meta_loss.item():.4f}")

if args.out:
    torch.save({f"net.{k}": v for k, v in net.state_dict().items()}, args.out)
