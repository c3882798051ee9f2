"""Temporal convolutional network (TCN) trained on the adding problem.

Paper: Shaojie Bai, J. Zico Kolter and Vladlen Koltun, "An Empirical Evaluation of Generic
Convolutional and Recurrent Networks for Sequence Modeling", arXiv:1803.01271 (2018).
Reference implementation: locuslab/TCN, TCN/tcn.py (Chomp1d, TemporalBlock: two weight-normalized
dilated causal convolutions, each padded on both sides and chomped back to causal, ReLU and
dropout, plus a 1x1 downsample convolution on the residual path when the widths differ;
TemporalConvNet: dilation 2^i at level i), TCN/adding_problem/model.py (TCN: a linear readout of
the last time step), TCN/adding_problem/utils.py (data_generator) and
the adding-problem training script (train: zero_grad, forward, MSE, backward, clip_grad_norm_ when
--clip > 0, Adam step).

Each sequence has two input channels: uniform values in [0, 1] and a marker channel with
exactly two ones, one in each half; the target is the sum of the two marked values. The TCN has
four levels of 16 channels, kernel size 4 (receptive field 91 > the sequence length 40) and
dropout 0.05; the weight norm is torch's parametrization, so every convolution weight is
trained through its magnitude (original0) and direction (original1), both leaves of the graph.
The convolution directions are drawn from N(0, 0.01) before the weight norm is applied, as the
reference's init_weights intends. One Adam optimizer holds every parameter, in two groups: a
small L2 weight decay on all weights (the weight-norm magnitudes and directions, the 1x1
downsample and the readout) and none on the biases. Each step runs zero_grad, forward, the MSE,
backward, gradient-norm clipping at 1.0 and the Adam step; the eval MSE is computed under
torch.no_grad().
Bug: clip_grad_norm_ is called after the loss but before loss.backward(), when the gradients
were just zeroed, so it clips nothing and Adam steps on the unclipped gradients.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--seq_len", type=int, default=40)
parser.add_argument("--nhid", type=int, default=16)
parser.add_argument("--levels", type=int, default=4)
parser.add_argument("--ksize", type=int, default=4)
parser.add_argument("--dropout", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=4e-3)
parser.add_argument("--wdecay", type=float, default=1e-4)
parser.add_argument("--clip", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def data_generator(n, seq_len):
    values = torch.rand(n, 1, seq_len)
    markers = torch.zeros(n, 1, seq_len)
    rows = torch.arange(n)
    markers[rows, 0, torch.randint(0, seq_len // 2, (n,))] = 1.0
    markers[rows, 0, torch.randint(seq_len // 2, seq_len, (n,))] = 1.0
    x = torch.cat([values, markers], 1)
    y = (values * markers).sum(2)
    return x, y


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super().__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


def causal_conv(n_in, n_out, kernel_size, dilation, padding):
    conv = nn.Conv1d(n_in, n_out, kernel_size, padding=padding, dilation=dilation)
    nn.init.normal_(conv.weight, 0.0, 0.01)
    return weight_norm(conv)


class TemporalBlock(nn.Module):
    def __init__(self, n_in, n_out, kernel_size, dilation, dropout):
        super().__init__()
        padding = (kernel_size - 1) * dilation
        self.conv1 = causal_conv(n_in, n_out, kernel_size, dilation, padding)
        self.conv2 = causal_conv(n_out, n_out, kernel_size, dilation, padding)
        self.net = nn.Sequential(self.conv1, Chomp1d(padding), nn.ReLU(), nn.Dropout(dropout),
                                 self.conv2, Chomp1d(padding), nn.ReLU(), nn.Dropout(dropout))
        self.downsample = nn.Conv1d(n_in, n_out, 1) if n_in != n_out else None
        if self.downsample is not None:
            nn.init.normal_(self.downsample.weight, 0.0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return F.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size, dropout):
        super().__init__()
        layers = []
        for i, n_out in enumerate(num_channels):
            n_in = num_inputs if i == 0 else num_channels[i - 1]
            layers.append(TemporalBlock(n_in, n_out, kernel_size, 2 ** i, dropout))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super().__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size, dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)
        nn.init.normal_(self.linear.weight, 0.0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])


x_train, y_train = data_generator(args.steps * args.batch_size, args.seq_len)
x_eval, y_eval = data_generator(256, args.seq_len)
model = TCN(2, 1, [args.nhid] * args.levels, args.ksize, args.dropout)

named = list(model.named_parameters())
no_decay = [p for n, p in named if n.endswith("bias")]
decay = [p for n, p in named if not n.endswith("bias")]
optimizer = torch.optim.Adam([
    {"params": decay, "weight_decay": args.wdecay},
    {"params": no_decay, "weight_decay": 0.0},
], lr=args.lr)

model.train()
for step in range(args.steps):
    i = step * args.batch_size
    x, y = x_train[i:i + args.batch_size], y_train[i:i + args.batch_size]
    optimizer.zero_grad()
    output = model(x)
    loss = F.mse_loss(output, y)
    if args.clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    loss.backward()
    optimizer.step()
    if step % 15 == 0 or step == args.steps - 1:
        print(f"step {step:3d} mse {loss.item():.4f}")

model.eval()
with torch.no_grad():
    eval_loss = F.mse_loss(model(x_eval), y_eval)
print(f"eval mse {eval_loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
