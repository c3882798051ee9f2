"""A dynamic filter network at a tiny size, after De Brabandere, Jia, Tuytelaars and Van Gool,
"Dynamic Filter Networks" (NeurIPS 2016, arXiv:1605.09673; the steerable-filter experiment of
dbbert/dfn, models/model_steerableFilter.py with layers/dynamic_filter_layer.py): a
filter-generating network maps a conditioning input to the filters of a convolution applied
sample by sample to the input, here a 1-D signal (``F.conv1d`` with one group per sample), then
a trainable readout (a gain and an offset). The conditioning (one-hot) says by how many steps
the target is the signal shifted; signals and shifts are made in the script. One Adam optimizer
holds the whole model, generator and readout.
Injected bug: the generated filters are taken with ``.detach()``, cut from the generator,
which the optimizer holds but no gradient reaches: only the readout trains.
``--out PATH`` saves the model's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=10)
parser.add_argument("--kernel", type=int, default=5)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)


class DynamicFilterNet(nn.Module):
    def __init__(self, n_shifts, kernel, hidden=16):
        super().__init__()
        self.kernel = kernel
        self.filter_gen = nn.Sequential(nn.Linear(n_shifts, hidden), nn.Tanh(),
                                        nn.Linear(hidden, kernel))
        self.readout = nn.Conv1d(1, 1, kernel_size=1)

    def forward(self, signal, cond):
        batch, length = signal.shape
        filters = self.filter_gen(cond).view(batch, 1, self.kernel).detach()
        out = F.conv1d(signal.view(1, batch, length), filters, padding=self.kernel // 2,
                       groups=batch)
        return self.readout(out.view(batch, 1, length)).squeeze(1)


n_shifts = args.kernel
half = args.kernel // 2
signals = torch.randn(64, 32)
shifts = torch.randint(0, n_shifts, (64,)) - half
cond = F.one_hot(shifts + half, n_shifts).float()
index = torch.arange(32)[None, :] + half - shifts[:, None]
targets = F.pad(signals, (half, half)).gather(1, index)

model = DynamicFilterNet(n_shifts, args.kernel)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for it in range(args.iterations):
    loss = F.mse_loss(model(signals, cond), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {it} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
