"""Denoising with a deep image prior at a tiny size, written after Ulyanov, Vedaldi and
Lempitsky, "Deep Image Prior" (CVPR 2018, arXiv:1711.10925; DmitryUlyanov/deep-image-prior,
its denoising notebook): an untrained convolutional network maps a fixed random input to the
noisy image and is fitted to it for a few steps, its output the denoised image. The input is
perturbed afresh at every step, as published (``reg_noise_std``); here the name ``noise`` is
bound to a new random tensor and ``net_input`` to the saved input plus it, each step: neither
requires grad and no optimizer holds them. The output's running average (``out_avg``) is
rebound each step too, from a detached output. Only the network is trained. Correct. Data: a
smooth image with a square on it and Gaussian noise, made in the script. ``--out PATH`` saves
the network's weights and the averaged output."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--side", type=int, default=16)
parser.add_argument("--channels", type=int, default=4, help="the random input's channels")
parser.add_argument("--reg-noise-std", type=float, default=1.0 / 30)
parser.add_argument("--exp-weight", type=float, default=0.9, help="the output's running average")
parser.add_argument("--sigma", type=float, default=0.1, help="the image's noise")
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

s = args.side
grid = torch.linspace(0, 1, s)
clean = 0.5 * (grid.view(1, -1) + grid.view(-1, 1)) / 2 + 0.25
clean[s // 4: s // 2, s // 4: s // 2] = 0.9
noisy = (clean + args.sigma * torch.randn(s, s)).view(1, 1, s, s)

net = nn.Sequential(nn.Conv2d(args.channels, 8, 3, padding=1), nn.ReLU(),
                    nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                    nn.Conv2d(8, 1, 3, padding=1), nn.Sigmoid())
net_input_saved = 0.1 * torch.rand(1, args.channels, s, s)
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)

out_avg = None
for step in range(args.steps):
    noise = torch.randn(net_input_saved.shape) * args.reg_noise_std
    net_input = net_input_saved + noise
    out = net(net_input)
    loss = F.mse_loss(out, noisy)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if out_avg is None:
        out_avg = out.detach()
    else:
        out_avg = out_avg * args.exp_weight + out.detach() * (1 - args.exp_weight)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"net": net.state_dict(), "out_avg": out_avg}, args.out)
