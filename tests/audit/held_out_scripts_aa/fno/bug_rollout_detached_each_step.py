"""Fourier Neural Operator rolled out in time on the 1-D viscous Burgers equation.

Paper: Zongyi Li, Nikola Kovachki, Kamyar Azizzadenesheli, Burigede Liu, Kaushik Bhattacharya,
Andrew Stuart and Anima Anandkumar, "Fourier Neural Operator for Parametric Partial
Differential Equations", ICLR 2021, arXiv:2010.08895.
Reference implementations: zongyi-li/fourier_neural_operator -- fourier_1d.py (SpectralConv1d:
rfft, a learned complex weight tensor multiplying the lowest `modes` Fourier coefficients,
irfft; FNO1d: lifting fc0 on the input and the grid, four Fourier layers each added to a
pointwise Conv1d and followed by GELU except the last, projection fc1/fc2), fourier_2d_time.py
(the autoregressive training loop: the model maps the last T_in frames to the next frame, its
output is concatenated to the input window for the following step, the relative L2 losses of
all T steps are summed and back-propagated through the whole rollout once per batch) and
utilities3.py (LpLoss); neuraloperator/neuraloperator (neuralop/layers/spectral_convolution.py
SpectralConv; neuralop/training/trainer.py, Trainer.train_one_epoch and train_one_batch:
zero_grad per batch, backward, optimizer step, scheduler step per epoch, with Adam with
weight decay and a StepLR schedule).

Trajectories of u_t + u u_x = nu u_xx on a periodic grid of 64 points are made with an explicit
finite-difference solver from random low-frequency initial conditions and sampled every 0.1
time units. The FNO (width 16, 8 Fourier modes, four layers) reads the last T_in = 4 frames and
the grid coordinate and predicts the next frame; during training it is rolled out T = 5 steps
from the true first window on its own predictions, the relative L2 loss of every step is
summed, and the loss is back-propagated through the entire rollout. Adam (lr 5e-3, weight
decay 1e-4) over all parameters, including the complex spectral weights, steps once per batch
after zero_grad and backward; StepLR halves the learning rate every two epochs.
Bug: each predicted frame is detached before it is fed back into the input window, so the
loss of a later step no longer back-propagates through the earlier steps of the rollout.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--nx", type=int, default=64)
parser.add_argument("--n_train", type=int, default=32)
parser.add_argument("--n_val", type=int, default=8)
parser.add_argument("--t_in", type=int, default=4)
parser.add_argument("--t_out", type=int, default=5)
parser.add_argument("--modes", type=int, default=8)
parser.add_argument("--width", type=int, default=16)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--lr", type=float, default=5e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

NU = 0.05
DT_FRAME = 0.1
SUBSTEPS = 10


def burgers_trajectories(n, nx, n_frames):
    x = torch.arange(nx) * (2 * math.pi / nx)
    dx = 2 * math.pi / nx
    u = torch.zeros(n, nx)
    for k in range(1, 4):
        amp = torch.randn(n, 1) / k
        phase = 2 * math.pi * torch.rand(n, 1)
        u = u + 0.5 * amp * torch.sin(k * x[None] + phase)
    frames = [u]
    dt = DT_FRAME / SUBSTEPS
    for _ in range(n_frames - 1):
        for _ in range(SUBSTEPS):
            up, um = torch.roll(u, -1, 1), torch.roll(u, 1, 1)
            u = u + dt * (-u * (up - um) / (2 * dx) + NU * (up - 2 * u + um) / dx ** 2)
        frames.append(u)
    return torch.stack(frames, -1)  # (n, nx, n_frames)


class SpectralConv1d(nn.Module):
    def __init__(self, in_channels, out_channels, modes):
        super().__init__()
        self.modes = modes
        scale = 1.0 / (in_channels * out_channels)
        self.weights = nn.Parameter(
            scale * torch.rand(in_channels, out_channels, modes, dtype=torch.cfloat))

    def forward(self, x):
        # x (B, C, N): keep the lowest modes, mix channels per mode, back to physical space
        x_ft = torch.fft.rfft(x)
        out_ft = torch.zeros(x.shape[0], self.weights.shape[1], x_ft.shape[-1],
                             dtype=torch.cfloat)
        out_ft[:, :, :self.modes] = torch.einsum("bix,iox->box", x_ft[:, :, :self.modes],
                                                 self.weights)
        return torch.fft.irfft(out_ft, n=x.shape[-1])


class FNO1d(nn.Module):
    def __init__(self, t_in, modes, width, n_layers=4):
        super().__init__()
        self.fc0 = nn.Linear(t_in + 1, width)
        self.convs = nn.ModuleList(SpectralConv1d(width, width, modes) for _ in range(n_layers))
        self.ws = nn.ModuleList(nn.Conv1d(width, width, 1) for _ in range(n_layers))
        self.fc1 = nn.Linear(width, 64)
        self.fc2 = nn.Linear(64, 1)

    def forward(self, u):
        # u (B, N, t_in) -> next frame (B, N, 1)
        grid = torch.linspace(0, 1, u.shape[1]).expand(u.shape[0], -1)[..., None]
        h = self.fc0(torch.cat([u, grid], -1)).permute(0, 2, 1)
        for i, (conv, w) in enumerate(zip(self.convs, self.ws)):
            h = conv(h) + w(h)
            if i < len(self.convs) - 1:
                h = F.gelu(h)
        h = F.gelu(self.fc1(h.permute(0, 2, 1)))
        return self.fc2(h)


def rel_l2(pred, target):
    # relative L2 error per sample, summed over the batch (LpLoss with size_average=False)
    diff = (pred - target).flatten(1).norm(dim=1)
    return (diff / target.flatten(1).norm(dim=1)).sum()


def rollout(model, xx, steps):
    preds = []
    for _ in range(steps):
        im = model(xx)
        preds.append(im)
        xx = torch.cat((xx[..., 1:], im), dim=-1)
    return torch.cat(preds, -1)


data = burgers_trajectories(args.n_train + args.n_val, args.nx, args.t_in + args.t_out)
train_a, train_u = data[:args.n_train, :, :args.t_in], data[:args.n_train, :, args.t_in:]
val_a, val_u = data[args.n_train:, :, :args.t_in], data[args.n_train:, :, args.t_in:]

model = FNO1d(args.t_in, args.modes, args.width)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

for epoch in range(args.epochs):
    model.train()
    perm = torch.randperm(args.n_train)
    train_l2 = 0.0
    for k in range(0, args.n_train, args.batch_size):
        idx = perm[k:k + args.batch_size]
        xx, yy = train_a[idx], train_u[idx]
        optimizer.zero_grad()
        loss = 0.0
        for t in range(args.t_out):
            im = model(xx)
            loss = loss + rel_l2(im, yy[..., t:t + 1])
            xx = torch.cat((xx[..., 1:], im.detach()), dim=-1)
        loss.backward()
        optimizer.step()
        train_l2 += loss.item()
    scheduler.step()

    model.eval()
    with torch.no_grad():
        pred = rollout(model, val_a, args.t_out)
        val_l2 = rel_l2(pred, val_u).item()
    print(f"epoch {epoch}  train step-l2 {train_l2 / (args.n_train * args.t_out):.4f}  "
          f"val full-l2 {val_l2 / args.n_val:.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
