"""The Lookahead optimizer written out in a training loop, at a tiny size, after Zhang, Lucas,
Hinton and Ba, "Lookahead Optimizer: k steps forward, 1 step back" (NeurIPS 2019,
arXiv:1907.08610; michaelrzhang/lookahead): an inner optimizer (Adam) steps the fast weights;
every ``--k`` steps the slow weights move ``--alpha`` of the way towards the fast weights, and
the fast weights are reset to the slow ones, the inner optimizer's state carried on. The model
is a softmax regression whose weight is a plain tensor that requires grad, held as an attribute
of a plain object (no module). As published: the reset writes the slow weights into the fast
weight in place (``.data.copy_``), so the inner optimizer, built once, keeps stepping the
weight the model reads. Data: a random linear teacher's labels, made in the script. ``--out
PATH`` saves the fast and the slow weights."""

import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--k", type=int, default=5, help="inner steps between synchronisations")
parser.add_argument("--alpha", type=float, default=0.5, help="the slow weights' step")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 4
teacher = torch.randn(dim, classes)


def batch(n):
    x = torch.randn(n, dim)
    return x, (x @ teacher).argmax(dim=1)


class SoftmaxRegression:
    """Logits ``[x, 1] @ weight``, the bias as the weight's last row."""

    def __init__(self):
        self.weight = (0.01 * torch.randn(dim + 1, classes)).requires_grad_()

    def __call__(self, x):
        return torch.cat([x, torch.ones(len(x), 1)], dim=1) @ self.weight


model = SoftmaxRegression()
slow = model.weight.detach().clone()
optimizer = torch.optim.Adam([model.weight], lr=args.lr)

for step in range(args.steps):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
    if (step + 1) % args.k == 0:
        slow += args.alpha * (model.weight.detach() - slow)
        model.weight.data.copy_(slow)

if args.out:
    torch.save({"fast": model.weight.detach(), "slow": slow}, args.out)
