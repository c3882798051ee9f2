"""Co-teaching at a tiny size, written after Han, Yao, Yu, Niu, Xu, Hu, Tsang and Sugiyama,
"Co-teaching: Robust Training of Deep Neural Networks with Extremely Noisy Labels" (NeurIPS 2018,
arXiv:1804.06872) and bhanML/Co-teaching (loss.py, ``loss_coteaching``; main.py, the forget
rate schedule): two networks each compute their per-sample cross-entropy; each ranks its batch
by its own detached losses (``torch.sort``, a value and an index each) and keeps its
``1 - forget_rate`` smallest, and each network is trained on the samples its PEER kept. The
sorted values are not used; the indices only select the trained losses. The forget rate grows
linearly to ``--forget-rate`` over ``--num-gradual`` iterations. Points made in the script
(noisy class prototypes), a fifth of the labels flipped. Adam for each network. Clean.
``--out PATH`` saves both networks' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--forget-rate", type=float, default=0.2)
parser.add_argument("--num-gradual", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 4
prototypes = torch.randn(classes, dim)
clean_labels = torch.randint(0, classes, (128,))
data = prototypes[clean_labels] + 0.5 * torch.randn(128, dim)
flip = torch.rand(128) < 0.2
noisy_labels = torch.where(flip, torch.randint(0, classes, (128,)), clean_labels)

net1 = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
net2 = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer1 = torch.optim.Adam(net1.parameters(), lr=0.01)
optimizer2 = torch.optim.Adam(net2.parameters(), lr=0.01)

for step in range(args.steps):
    i = 16 * (step % 8)
    x, t = data[i:i + 16], noisy_labels[i:i + 16]
    forget_rate = args.forget_rate * min(step / args.num_gradual, 1.0)
    loss_1 = F.cross_entropy(net1(x), t, reduction="none")
    loss_2 = F.cross_entropy(net2(x), t, reduction="none")
    _, ind_1_sorted = torch.sort(loss_1.detach())
    _, ind_2_sorted = torch.sort(loss_2.detach())
    num_remember = int((1 - forget_rate) * len(t))
    loss_1_update = loss_1[ind_2_sorted[:num_remember]].mean()
    loss_2_update = loss_2[ind_1_sorted[:num_remember]].mean()
    optimizer1.zero_grad()
    loss_1_update.backward()
    optimizer1.step()
    optimizer2.zero_grad()
    loss_2_update.backward()
    optimizer2.step()
    print(f"step {step} loss1 {loss_1_update.item():.4f} loss2 {loss_2_update.item():.4f}")

if args.out:
    state = {f"net1.{k}": v for k, v in net1.state_dict().items()}
    state.update({f"net2.{k}": v for k, v in net2.state_dict().items()})
    torch.save(state, args.out)
