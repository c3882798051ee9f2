"""LSTNet on a synthetic multivariate periodic series.

Paper: Guokun Lai, Wei-Cheng Chang, Yiming Yang, Hanxiao Liu, "Modeling Long- and Short-Term
Temporal Patterns with Deep Neural Networks", SIGIR 2018, arXiv:1703.07015.
Reference implementation: laiguokun/LSTNet -- models/LSTNet.py (Model.forward), main.py (train)
and Optim.py (Optim.step, which rescales the gradients to a maximal norm before the update).

The window of the last P observations of m series goes through a 2D convolution spanning all
series, then two recurrent paths: a GRU over the whole convolved sequence and a recurrent-skip
GRU that links positions one period apart (the sequence is cut into `skip` interleaved
sub-sequences folded into the batch). Their last hidden states are concatenated and mapped to
the m outputs, and a linear autoregressive "highway" over the last hw raw values of each series
is added in parallel. The convolution is shared by both recurrent paths and is trained through
both; every part (conv, GRU, skip-GRU, output layer, highway) is trained jointly with an L1 loss
summed over the de-normalised outputs. Each batch: zero the gradients, forward, backward, clip
the global gradient norm, Adam step. Nothing is detached.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--window", type=int, default=36)
parser.add_argument("--horizon", type=int, default=3)
parser.add_argument("--hidCNN", type=int, default=12)
parser.add_argument("--hidRNN", type=int, default=12)
parser.add_argument("--hidSkip", type=int, default=4)
parser.add_argument("--CNN_kernel", type=int, default=4)
parser.add_argument("--skip", type=int, default=8)
parser.add_argument("--highway_window", type=int, default=8)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument("--clip", type=float, default=10.0)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_series(n_steps=260, m=4):
    t = torch.arange(n_steps, dtype=torch.float32)[:, None]
    phase = 2 * math.pi * torch.rand(1, m)
    amp = 0.3 + 0.4 * torch.rand(1, m)
    raw = (2.0 + amp * torch.sin(2 * math.pi * t / args.skip + phase)
           + 0.3 * torch.sin(2 * math.pi * t / 48 + 2 * phase)
           + 0.05 * torch.randn(n_steps, m))
    scale = raw.abs().max(0).values
    return raw / scale, scale


def make_windows(series):
    n = series.size(0) - args.window - args.horizon + 1
    X = torch.stack([series[i:i + args.window] for i in range(n)])
    Y = torch.stack([series[i + args.window + args.horizon - 1] for i in range(n)])
    return X, Y


class LSTNet(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.P, self.m = args.window, m
        self.hidR, self.hidC, self.hidS = args.hidRNN, args.hidCNN, args.hidSkip
        self.Ck, self.skip, self.hw = args.CNN_kernel, args.skip, args.highway_window
        self.pt = (self.P - self.Ck) // self.skip
        self.conv1 = nn.Conv2d(1, self.hidC, kernel_size=(self.Ck, self.m))
        self.GRU1 = nn.GRU(self.hidC, self.hidR)
        self.GRUskip = nn.GRU(self.hidC, self.hidS)
        self.dropout = nn.Dropout(p=args.dropout)
        self.linear1 = nn.Linear(self.hidR + self.skip * self.hidS, self.m)
        self.highway = nn.Linear(self.hw, 1)

    def forward(self, x):
        batch_size = x.size(0)
        c = x.view(-1, 1, self.P, self.m)
        c = self.dropout(F.relu(self.conv1(c))).squeeze(3)

        r = c.permute(2, 0, 1).contiguous()
        _, r = self.GRU1(r)
        r = self.dropout(r.squeeze(0))

        s = c[:, :, -self.pt * self.skip:].contiguous()
        s = s.view(batch_size, self.hidC, self.pt, self.skip)
        s = s.permute(2, 0, 3, 1).contiguous()
        s = s.view(self.pt, batch_size * self.skip, self.hidC)
        _, s = self.GRUskip(s)
        s = self.dropout(s.view(batch_size, self.skip * self.hidS))
        r = torch.cat((r, s), 1)
        res = self.linear1(r)

        z = x[:, -self.hw:, :].permute(0, 2, 1).contiguous().view(-1, self.hw)
        z = self.highway(z).view(-1, self.m)
        return torch.sigmoid(res + z)


series, scale = make_series()
X, Y = make_windows(series)
model = LSTNet(series.size(1))
criterion = nn.L1Loss(reduction="sum")
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for epoch in range(1, args.epochs + 1):
    model.train()
    total_loss, n_samples = 0.0, 0
    perm = torch.randperm(X.size(0))
    for start in range(0, X.size(0), args.batch_size):
        idx = perm[start:start + args.batch_size]
        xb, yb = X[idx], Y[idx]
        model.zero_grad()
        output = model(xb)
        scale_b = scale.expand(output.size(0), -1)
        loss = criterion(output * scale_b, yb * scale_b)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        total_loss += loss.item()
        n_samples += output.numel()
    print(f"epoch {epoch:2d}  train L1 {total_loss / n_samples:.4f}")

if args.out is not None:
    torch.save({"model": model.state_dict()}, args.out)
