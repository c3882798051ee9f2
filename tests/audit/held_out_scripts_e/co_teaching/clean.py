"""Co-teaching at a tiny size, written after Han, Yao, Yu, Niu, Xu, Hu, Tsang and Sugiyama,
"Co-teaching: Robust Training of Deep Neural Networks with Extremely Noisy Labels" (NeurIPS 2018,
arXiv:1804.06872), Algorithm 1, with the loss and the training step of bhanML/Co-teaching
(https://github.com/bhanML/Co-teaching, loss.py loss_coteaching and main.py train): two networks
with an Adam optimizer each; on every minibatch each network ranks the samples by its own
cross-entropy (on the values, cut from the graph) and keeps the ``1 - forget_rate`` fraction with
the smallest loss, and each network is trained on the samples its peer kept; the forget rate grows
linearly to its final value over the first steps. Each optimizer clears its network's gradients
before its backward pass. Two MLP classifiers on vectors made in the script, with 30% of the labels
flipped. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--forget-rate", type=float, default=0.3)
parser.add_argument("--num-gradual", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 12, 4
means = 1.5 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    x = means[y] + torch.randn(n, dim)
    flip = torch.rand(n) < 0.3
    return x, torch.where(flip, torch.randint(0, classes, (n,)), y)


def loss_coteaching(y_1, y_2, t, forget_rate):
    loss_1 = F.cross_entropy(y_1, t, reduction="none")
    ind_1_sorted = torch.argsort(loss_1.detach())
    loss_2 = F.cross_entropy(y_2, t, reduction="none")
    ind_2_sorted = torch.argsort(loss_2.detach())
    num_remember = int((1 - forget_rate) * len(t))
    ind_1_update = ind_1_sorted[:num_remember]
    ind_2_update = ind_2_sorted[:num_remember]
    # exchange: each network learns from the samples its peer found clean
    loss_1_update = F.cross_entropy(y_1[ind_2_update], t[ind_2_update])
    loss_2_update = F.cross_entropy(y_2[ind_1_update], t[ind_1_update])
    return loss_1_update, loss_2_update


def mlp():
    return nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))


net1, net2 = mlp(), mlp()
optimizer1 = torch.optim.Adam(net1.parameters(), lr=5e-3)
optimizer2 = torch.optim.Adam(net2.parameters(), lr=5e-3)
for step in range(args.steps):
    x, y = batch(args.batch_size)
    forget_rate = args.forget_rate * min(step / args.num_gradual, 1.0)
    logits1 = net1(x)
    logits2 = net2(x)
    loss_1, loss_2 = loss_coteaching(logits1, logits2, y, forget_rate)
    optimizer1.zero_grad()
    loss_1.backward()
    optimizer1.step()
    optimizer2.zero_grad()
    loss_2.backward()
    optimizer2.step()
    print(f"step {step} forget {forget_rate:.2f} loss1 {loss_1.item():.4f} "
          f"loss2 {loss_2.item():.4f}")

if args.out:
    torch.save({"net1": net1.state_dict(), "net2": net2.state_dict()}, args.out)
