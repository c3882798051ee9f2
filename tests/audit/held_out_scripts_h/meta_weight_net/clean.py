"""Meta-Weight-Net at a tiny size, written after Shu, Xie, Yi, Zhao, Zhou, Xu and Meng,
"Meta-Weight-Net: Learning an Explicit Mapping For Sample Weighting" (NeurIPS 2019,
arXiv:1902.07379), Algorithm 1, with xjtushujun/meta-weight-net
(https://github.com/xjtushujun/meta-weight-net, MW-Net.py train and resnet.py VNet). Each
iteration first takes a one-step look-ahead of the classifier on a noisy training batch: the
per-sample losses, fed to the weighting net as values (cost_v.data in MW-Net.py), are weighted by
its outputs, the weighted loss is differentiated with create_graph=True and the look-ahead
parameters theta - lr * grad are read by torch.func.functional_call (for the meta_model and its
update_params of the reference); the cross-entropy of the look-ahead classifier on a clean meta
batch then trains the weighting net by Adam (optimizer_vnet). Then the classifier takes its real
SGD step on the same batch, with the weights of the updated weighting net computed under
torch.no_grad(), constants of the classifier's loss. Gaussian clusters lifted by a random map, with
40% of the training labels flipped uniformly and a small clean meta set, made in the script. As
published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--meta-batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--vnet-lr", type=float, default=1e-3)
parser.add_argument("--corruption-prob", type=float, default=0.4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, n_classes, n_train, n_meta = 16, 32, 4, 512, 64

lift = torch.randn(4, dim)
centres = 2 * torch.randn(n_classes, 4)


def make_set(n):
    labels = torch.randint(0, n_classes, (n,))
    points = centres[labels] + torch.randn(n, 4)
    return torch.tanh(points @ lift / 2), labels


x_train, y_train = make_set(n_train)
flip = torch.rand(n_train) < args.corruption_prob
y_train = torch.where(flip, torch.randint(0, n_classes, (n_train,)), y_train)
x_meta, y_meta = make_set(n_meta)


class VNet(nn.Module):
    def __init__(self, hidden_dim=16):
        super().__init__()
        self.linear1 = nn.Linear(1, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, 1)

    def forward(self, x):
        return torch.sigmoid(self.linear2(F.relu(self.linear1(x))))


model = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
vnet = VNet()
optimizer_model = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                                  weight_decay=5e-4)
optimizer_vnet = torch.optim.Adam(vnet.parameters(), lr=args.vnet_lr, weight_decay=1e-4)

for step in range(args.steps):
    idx = torch.randint(0, n_train, (args.batch_size,))
    inputs, targets = x_train[idx], y_train[idx]
    # look-ahead of the classifier, differentiable with respect to the weighting net
    params = dict(model.named_parameters())
    outputs = functional_call(model, params, (inputs,))
    cost = F.cross_entropy(outputs, targets, reduction="none").reshape(-1, 1)
    v_lambda = vnet(cost.detach())
    l_f_meta = (cost * v_lambda).sum() / len(cost)
    grads = torch.autograd.grad(l_f_meta, list(params.values()), create_graph=True)
    fast_params = {name: p - args.lr * g for (name, p), g in zip(params.items(), grads)}
    meta_idx = torch.randint(0, n_meta, (args.meta_batch_size,))
    y_g_hat = functional_call(model, fast_params, (x_meta[meta_idx],))
    l_g_meta = F.cross_entropy(y_g_hat, y_meta[meta_idx])
    optimizer_vnet.zero_grad()
    l_g_meta.backward()
    optimizer_vnet.step()
    # the classifier's real step, weighted by the updated weighting net
    outputs = model(inputs)
    cost_v = F.cross_entropy(outputs, targets, reduction="none").reshape(-1, 1)
    with torch.no_grad():
        w_new = vnet(cost_v)
    loss = (cost_v * w_new).sum() / len(cost_v)
    optimizer_model.zero_grad()
    loss.backward()
    optimizer_model.step()
    print(f"step {step} loss {loss.item():.4f} meta loss {l_g_meta.item():.4f} "
          f"mean weight {w_new.mean().item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "vnet": vnet.state_dict()}, args.out)
