"""Deep Co-Training's co-training loss at a tiny size, written after Qiao, Shen, Zhang, Wang and
Yuille, "Deep Co-Training for Semi-Supervised Image Recognition" (ECCV 2018, arXiv:1803.05984;
Eq. 2 and 3: the cross-entropy of each network on the labelled data plus lambda times the
Jensen-Shannon divergence between the two networks' predictions on the unlabelled data) and
AlanChou/Deep-Co-Training-for-Semi-Supervised-Image-Recognition (loss.py, ``loss_cot``: the
entropy of the mean of the two softmaxes minus the mean of their entropies, with no cut, so the
agreement trains both networks towards each other on purpose). The view-difference term of
Eq. 4 (adversarial examples) is left out. Two networks of one shape from different
initialisations, one SGD optimizer over both. Points made in the script, a quarter labelled.
Clean. ``--out PATH`` saves both networks' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

net1 = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
net2 = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes))
optimizer = torch.optim.SGD([*net1.parameters(), *net2.parameters()], lr=0.1, momentum=0.9)
lambda_cot = 1.0


def loss_cot(u_p1, u_p2):
    s1, s2 = F.softmax(u_p1, dim=1), F.softmax(u_p2, dim=1)
    mean = 0.5 * (s1 + s2)
    entropy_of_mean = -(mean * torch.log(mean)).sum()
    mean_entropy = -0.5 * ((s1 * F.log_softmax(u_p1, dim=1)).sum()
                           + (s2 * F.log_softmax(u_p2, dim=1)).sum())
    return (entropy_of_mean - mean_entropy) / len(u_p1)


for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    x_l, y_l, x_u = x[:4], y[:4], x[4:]
    sup = F.cross_entropy(net1(x_l), y_l) + F.cross_entropy(net2(x_l), y_l)
    cot = loss_cot(net1(x_u), net2(x_u))
    loss = sup + lambda_cot * cot
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} cot {cot.item():.4f}")

if args.out:
    torch.save({**{f"net1.{k}": v for k, v in net1.state_dict().items()},
                **{f"net2.{k}": v for k, v in net2.state_dict().items()}}, args.out)
