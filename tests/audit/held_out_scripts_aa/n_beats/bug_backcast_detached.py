"""N-BEATS (interpretable configuration) on synthetic monthly series with trend and seasonality.

Paper: Boris N. Oreshkin, Dmitri Carpov, Nicolas Chapados and Yoshua Bengio, "N-BEATS: Neural
basis expansion analysis for interpretable time series forecasting", ICLR 2020,
arXiv:1905.10437. Reference implementation: ServiceNow/N-BEATS (formerly ElementAI/N-BEATS),
models/nbeats.py (NBeatsBlock: a stack of ReLU fully connected layers and a linear layer to the
expansion coefficients theta; NBeats.forward: the input is flipped, the forecast starts from the
last observed value, every block's backcast is subtracted from its input and its forecast added
to the output; TrendBasis, SeasonalityBasis: fixed polynomial and Fourier bases),
experiments/model.py (interpretable: a trend stack and a seasonality stack, weights shared
within each stack), common/sampler.py (TimeseriesSampler: windows cut at random points of the
last history_size horizons of randomly drawn series), common/torch/losses.py (smape_2_loss) and
experiments/trainer.py (trainer: Adam, zero_grad / backward / clip_grad_norm_(1.0) / step, the
learning rate halved every third of the iterations).

Twenty-four positive series of 132 months (level, linear trend, yearly seasonality, noise). The
horizon is H = 12 and the lookback 2H. The model has a trend stack (polynomial basis of degree
2) and a seasonality stack (Fourier basis, 0 to H/2 - 1 cycles per horizon), two blocks each with
weights shared inside the stack, three hidden layers of 64 units per block. The doubly residual
forward keeps both branches in the graph: the sMAPE of the summed forecast reaches each block
through its own forecast and, through the subtracted backcasts, every earlier block, so the
backcast coefficients are trained only by that path. Phase 1 trains on windows whose horizon
ends before the last H points of each series and reports the sMAPE on that validation horizon
(the paper tunes on the last horizon of the training series); phase 2 continues from these
weights on windows of the full history with a fresh Adam at half the rate, then forecasts the
next H months under torch.no_grad(). Both loops use the reference trainer's order: zero_grad,
forward, loss, backward, clipping, step.
Bug: each block's backcast is detached before it is subtracted from the residual input, so
the backcast coefficients of both stacks get no gradient and later blocks' losses no longer
reach earlier blocks through the backcast branch.
"""
import argparse
import math

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--refit_steps", type=int, default=15)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--batch_size", type=int, default=64)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_SERIES = 24
LENGTH = 132
H = 12
LOOKBACK = 2 * H
HISTORY = 6 * H
HIDDEN = 64
LAYERS = 3
BLOCKS_PER_STACK = 2


def make_series():
    t = torch.arange(LENGTH, dtype=torch.float32)
    level = 2.0 * torch.exp(0.4 * torch.randn(N_SERIES, 1))
    slope = 0.01 * torch.randn(N_SERIES, 1)
    amp = 0.2 + 0.3 * torch.rand(N_SERIES, 1)
    phase = 2 * math.pi * torch.rand(N_SERIES, 1)
    season = amp * torch.sin(2 * math.pi * t / 12 + phase)
    noise = 0.05 * torch.randn(N_SERIES, LENGTH)
    return (level * (1.0 + slope * t / 12 + season + noise)).clamp_min(0.05)


def sample_windows(series, batch_size):
    # cut points in the last HISTORY steps, full insample and outsample windows only
    n, length = series.shape
    idx = torch.randint(0, n, (batch_size,))
    low = max(LOOKBACK, length - HISTORY)
    cut = torch.randint(low, length - H + 1, (batch_size,))
    x = series[idx[:, None], cut[:, None] - LOOKBACK + torch.arange(LOOKBACK)]
    y = series[idx[:, None], cut[:, None] + torch.arange(H)]
    return x, y


class TrendBasis(nn.Module):
    def __init__(self, degree, backcast_size, forecast_size):
        super().__init__()
        self.p = degree + 1
        tb = torch.arange(backcast_size, dtype=torch.float32) / backcast_size
        tf = torch.arange(forecast_size, dtype=torch.float32) / forecast_size
        self.register_buffer("backcast_poly", torch.stack([tb ** i for i in range(self.p)]))
        self.register_buffer("forecast_poly", torch.stack([tf ** i for i in range(self.p)]))

    def theta_size(self):
        return 2 * self.p

    def forward(self, theta):
        forecast = theta[:, :self.p] @ self.forecast_poly
        backcast = theta[:, self.p:] @ self.backcast_poly
        return backcast, forecast


class SeasonalityBasis(nn.Module):
    def __init__(self, backcast_size, forecast_size):
        super().__init__()
        # frequencies in cycles per forecast horizon; the backcast runs backwards in time
        freq = torch.arange(forecast_size // 2, dtype=torch.float32)
        tb = torch.arange(backcast_size, dtype=torch.float32)[:, None] / forecast_size
        tf = torch.arange(forecast_size, dtype=torch.float32)[:, None] / forecast_size
        self.k = freq.numel()
        self.register_buffer("backcast_cs", self.cos_sin(-2 * math.pi * tb * freq))
        self.register_buffer("forecast_cs", self.cos_sin(2 * math.pi * tf * freq))

    @staticmethod
    def cos_sin(grid):
        return torch.cat([torch.cos(grid), torch.sin(grid)], 1).T

    def theta_size(self):
        return 4 * self.k

    def forward(self, theta):
        forecast = theta[:, :2 * self.k] @ self.forecast_cs
        backcast = theta[:, 2 * self.k:] @ self.backcast_cs
        return backcast, forecast


class NBeatsBlock(nn.Module):
    def __init__(self, input_size, basis, layers, layer_size):
        super().__init__()
        sizes = [input_size] + [layer_size] * layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.basis_parameters = nn.Linear(layer_size, basis.theta_size())
        self.basis_function = basis

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = torch.relu(layer(h))
        return self.basis_function(self.basis_parameters(h))


class NBeats(nn.Module):
    def __init__(self):
        super().__init__()
        trend = NBeatsBlock(LOOKBACK, TrendBasis(2, LOOKBACK, H), LAYERS, HIDDEN)
        season = NBeatsBlock(LOOKBACK, SeasonalityBasis(LOOKBACK, H), LAYERS, HIDDEN)
        self.stacks = nn.ModuleList([trend, season])

    def forward(self, x):
        residuals = x.flip(dims=(1,))
        forecast = x[:, -1:]
        for block in self.stacks:
            for _ in range(BLOCKS_PER_STACK):
                backcast, block_forecast = block(residuals)
                residuals = residuals - backcast.detach()
                forecast = forecast + block_forecast
        return forecast


def smape_loss(forecast, target):
    return 200.0 * ((forecast - target).abs() / (forecast.abs() + target.abs())).mean()


def lr_at(step, base_lr, total):
    return base_lr * 0.5 ** (step // max(1, total // 3))


series = make_series()
train_part = series[:, :-H]
model = NBeats()

# phase 1: train with the last horizon kept for validation
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps):
    x, y = sample_windows(train_part, args.batch_size)
    optimizer.zero_grad()
    forecast = model(x)
    loss = smape_loss(forecast, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step + 1, args.lr, args.steps)
    if step % 10 == 0 or step == args.steps - 1:
        print(f"train step {step:3d} smape {loss.item():.3f}")

with torch.no_grad():
    val = smape_loss(model(train_part[:, -LOOKBACK:]), series[:, -H:])
print(f"validation horizon smape {val.item():.3f}")

# phase 2: continue on the full history with a fresh optimizer
refit_optimizer = torch.optim.Adam(model.parameters(), lr=args.lr / 2)
for step in range(args.refit_steps):
    x, y = sample_windows(series, args.batch_size)
    refit_optimizer.zero_grad()
    forecast = model(x)
    loss = smape_loss(forecast, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    refit_optimizer.step()
    if step % 5 == 0 or step == args.refit_steps - 1:
        print(f"refit step {step:3d} smape {loss.item():.3f}")

with torch.no_grad():
    future = model(series[:, -LOOKBACK:])
print(f"forecast mean {future.mean().item():.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
