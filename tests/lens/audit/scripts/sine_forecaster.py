"""An autoregressive sine-wave forecaster at a tiny size, written after pytorch/examples
time_sequence_prediction/train.py (https://github.com/pytorch/examples/blob/
cd01f93000a6679e768700dd29e417a1e5fd10e5/time_sequence_prediction/train.py): an ``LSTMCell``
and a linear head stepped over the sequence, whose ``future`` loop feeds each prediction back as
the next input. Here training switches to that closed loop after ``--open-loop-iters``
iterations (as scheduled sampling does), and the fed-back prediction is detached; Adam instead
of L-BFGS. Data: noisy sine waves made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=6)
parser.add_argument("--open-loop-iters", type=int, default=3)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)

LENGTH, BATCH, HIDDEN = 10, 8, 12


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, closed_loop):
        h_t = torch.zeros(input.size(0), HIDDEN)
        c_t = torch.zeros(input.size(0), HIDDEN)
        x_t = input[:, :1]
        outputs = []
        for i in range(1, input.size(1)):
            h_t, c_t = self.lstm1(x_t, (h_t, c_t))
            output = self.linear(h_t)
            outputs.append(output)
            if closed_loop:
                x_t = output.detach()
            else:
                x_t = input[:, i:i + 1]
        return torch.cat(outputs, dim=1)


seq = Sequence()
optimizer = torch.optim.Adam(seq.parameters(), lr=0.01)

for it in range(args.iters):
    phase = torch.rand(BATCH, 1) * 6.28
    wave = torch.sin(0.6 * torch.arange(LENGTH).float()[None] + phase)
    wave = wave + 0.02 * torch.randn(BATCH, LENGTH)
    optimizer.zero_grad()
    out = seq(wave, closed_loop=it >= args.open_loop_iters)
    loss = F.mse_loss(out, wave[:, 1:])
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save(seq.state_dict(), args.out)
