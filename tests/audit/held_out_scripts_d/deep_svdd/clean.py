"""One-class Deep SVDD at a tiny size, written after Ruff, Vandermeulen, Goernitz, Deecke,
Siddiqui, Binder, Mueller and Kloft, "Deep One-Class Classification" (ICML 2018), with the two
stages of its reference implementation lukasruff/Deep-SVDD-PyTorch
(https://github.com/lukasruff/Deep-SVDD-PyTorch, src/optim/ae_trainer.py and
src/optim/deepSVDD_trainer.py): a bias-free encoder is first pretrained as the encoder of an
autoencoder, then the hypersphere center ``c`` is fixed once as the mean of the encoder's outputs
on the training data (computed under torch.no_grad(), coordinates near zero pushed to +-eps), and
the encoder trained on ``mean ||phi(x) - c||^2`` with Adam and a small weight decay. A one-layer
bias-free encoder with a leaky ReLU, on normal-class vectors made in the script. As published:
clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, dim, rep_dim = 128, 10, 4
normal_mean = torch.randn(dim)
data = normal_mean + 0.5 * torch.randn(n, dim)


def batches(batch_size):
    return data[torch.randperm(n)].split(batch_size)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rep_dim = rep_dim
        self.fc = nn.Linear(dim, rep_dim, bias=False)

    def forward(self, x):
        return F.leaky_relu(self.fc(x), 0.1)


def init_center_c(net, eps=0.1):
    n_samples = 0
    c = torch.zeros(net.rep_dim)
    with torch.no_grad():
        for x in batches(args.batch_size):
            outputs = net(x)
            n_samples += outputs.shape[0]
            c += outputs.sum(0)
    c /= n_samples
    c[(c.abs() < eps) & (c < 0)] = -eps
    c[(c.abs() < eps) & (c > 0)] = eps
    return c


net = Encoder()
decoder = nn.Linear(rep_dim, dim, bias=False)

# stage 1: autoencoder pretraining of the encoder
ae_optimizer = torch.optim.Adam([*net.parameters(), *decoder.parameters()], lr=1e-2,
                                weight_decay=1e-6)
for step in range(args.pretrain_steps):
    x = data[torch.randint(0, n, (args.batch_size,))]
    loss = (decoder(net(x)) - x).pow(2).sum(1).mean()
    ae_optimizer.zero_grad()
    loss.backward()
    ae_optimizer.step()
    print(f"pretrain {step} reconstruction {loss.item():.4f}")

# stage 2: the one-class objective around a center fixed once
c = init_center_c(net)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=1e-6)
for step in range(args.steps):
    x = data[torch.randint(0, n, (args.batch_size,))]
    dist = (net(x) - c).pow(2).sum(1)
    loss = dist.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} distance {loss.item():.4f}")

if args.out:
    torch.save({"net": net.state_dict(), "decoder": decoder.state_dict()}, args.out)
