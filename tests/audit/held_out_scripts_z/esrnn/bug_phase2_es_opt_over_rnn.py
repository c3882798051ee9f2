"""ES-RNN: per-series Holt-Winters smoothing learnt jointly with a shared dilated LSTM.

Paper: Slawek Smyl, "A hybrid method of exponential smoothing and recurrent neural networks for
time series forecasting", International Journal of Forecasting 36(1), 75-85, 2020 (the M4
winner; no arXiv version).
Reference implementations: kdgutier/esrnn_torch, ESRNN/utils/ESRNN.py (classes _ESM with
compute_levels_seasons/normalize, _RNN, _ESRNN), ESRNN/ESRNN.py (ESRNN.train: separate Adam
optimizers es_optimizer over esrnn.es and rnn_optimizer over esrnn.rnn, per-group gradient
clipping, warm_start), src/utils/losses.py (SmylLoss = pinball + level variability penalty),
src/utils/DRNN.py (DRNN); and damitkwr/ESRNN-GPU, es_rnn/model.py (class ESRNN, ResidualDRNN).

The script makes a panel of positive quarterly series with trend, seasonality and noise. Each
series owns three kinds of parameters: a level smoothing logit, a seasonality smoothing logit
and S initial log-seasonality values. A multiplicative Holt-Winters recursion run with them
gives the level and seasonal index at every step; sliding input windows are deseasonalised,
divided by the level at the window's last point and logged, and the output windows are
normalised the same way (same level). A stack of dilated LSTM groups with a residual connection
between groups and a linear adapter maps each input window to the normalised horizon. The loss
is the pinball loss plus a penalty on the wiggliness of the log level. The gradient of the
forecast error reaches the smoothing coefficients and the initial seasonality through both the
input and the target windows (levels and seasonal indices are not detached); only the small
input noise is a constant. Two Adam optimizers, one over the ES parameters (scaled learning
rate) and one over the RNN, step together after per-group clipping. Training runs in two
phases: first on the series without their last two years, then, warm-starting from the first
phase, on the full history with fresh optimizers at half the learning rate. Bug: in the
second phase the ES optimizer is rebuilt over model.rnn.parameters() (a copy-paste slip), so
the per-series smoothing coefficients and initial seasonality are frozen during the refit
while the RNN weights are stepped by two Adam optimizers at once.
"""
import argparse

import torch
import torch.nn as nn


class ES(nn.Module):
    def __init__(self, n_series, season):
        super().__init__()
        self.season = season
        self.lev_sms = nn.Parameter(torch.full((n_series,), 0.5))
        self.seas_sms = nn.Parameter(torch.full((n_series,), 0.5))
        self.init_seas = nn.Parameter(torch.full((n_series, season), 0.5))

    def forward(self, y, idx):
        alpha = torch.sigmoid(self.lev_sms[idx])
        gamma = torch.sigmoid(self.seas_sms[idx])
        seas = list(torch.exp(self.init_seas[idx]).unbind(1))
        seas.append(seas[0])
        levels = [y[:, 0] / seas[0]]
        for t in range(1, y.shape[1]):
            lev = alpha * (y[:, t] / seas[t]) + (1 - alpha) * levels[t - 1]
            levels.append(lev)
            seas.append(gamma * (y[:, t] / lev) + (1 - gamma) * seas[t])
        return torch.stack(levels, 1), torch.stack(seas, 1)


class DilatedLSTM(nn.Module):
    def __init__(self, in_dim, hidden, dilations):
        super().__init__()
        self.dilations = dilations
        self.cells = nn.ModuleList(
            [nn.LSTMCell(in_dim if i == 0 else hidden, hidden) for i in range(len(dilations))])

    def forward(self, x):
        for cell, d in zip(self.cells, self.dilations):
            zeros = x.new_zeros(x.shape[1], cell.hidden_size)
            hs, cs = [], []
            for t in range(x.shape[0]):
                state = (hs[t - d], cs[t - d]) if t >= d else (zeros, zeros)
                h, c = cell(x[t], state)
                hs.append(h)
                cs.append(c)
            x = torch.stack(hs)
        return x


class RNN(nn.Module):
    def __init__(self, input_size, output_size, hidden, dilations):
        super().__init__()
        self.groups = nn.ModuleList(
            [DilatedLSTM(input_size if g == 0 else hidden, hidden, d)
             for g, d in enumerate(dilations)])
        self.adapter = nn.Linear(hidden, output_size)

    def forward(self, x):
        for g, group in enumerate(self.groups):
            out = group(x)
            x = out + x if g > 0 else out
        return self.adapter(x)


class ESRNN(nn.Module):
    def __init__(self, n_series, season, input_size, output_size, hidden, dilations):
        super().__init__()
        self.input_size, self.output_size = input_size, output_size
        self.es = ES(n_series, season)
        self.rnn = RNN(input_size, output_size, hidden, dilations)

    def forward(self, y, idx, noise_std):
        levels, seas = self.es(y, idx)
        xs, ys = [], []
        for w in range(y.shape[1] - self.input_size - self.output_size + 1):
            end = w + self.input_size
            lev = levels[:, end - 1:end]
            xs.append(torch.log(y[:, w:end] / seas[:, w:end] / lev))
            y_out = y[:, end:end + self.output_size]
            ys.append(torch.log(y_out / seas[:, end:end + self.output_size] / lev))
        windows_x, windows_y = torch.stack(xs), torch.stack(ys)
        windows_x = windows_x + noise_std * torch.randn_like(windows_x)
        return self.rnn(windows_x), windows_y, levels


def smyl_loss(y_hat, y, levels, tau, level_penalty):
    diff = y - y_hat
    pinball = torch.max(tau * diff, (tau - 1) * diff).mean()
    log_diff = torch.log(levels[:, 1:]) - torch.log(levels[:, :-1])
    wiggle = ((log_diff[:, 1:] - log_diff[:, :-1]) ** 2).mean()
    return pinball + level_penalty * wiggle, pinball


def make_panel(n_series, n_time, season):
    t = torch.arange(n_time).float()
    base = 50 + 100 * torch.rand(n_series, 1)
    growth = 0.01 + 0.02 * torch.rand(n_series, 1)
    amp = 0.1 + 0.25 * torch.rand(n_series, 1)
    phase = torch.randint(0, season, (n_series, 1)).float()
    seas = 1 + amp * torch.sin(2 * 3.14159 * (t + phase) / season)
    noise = torch.exp(0.03 * torch.randn(n_series, n_time))
    return base * torch.exp(growth * t) * seas * noise


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--epochs-full", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=6)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--per-series-lr-multip", type=float, default=2.0)
    parser.add_argument("--clip", type=float, default=20.0)
    parser.add_argument("--noise-std", type=float, default=1e-3)
    parser.add_argument("--tau", type=float, default=0.5)
    parser.add_argument("--level-penalty", type=float, default=50.0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    n_series, n_time, season, horizon = 12, 24, 4, 4
    panel = make_panel(n_series, n_time, season)
    y_short = panel[:, :n_time - 2 * season]
    model = ESRNN(n_series, season, input_size=4, output_size=horizon, hidden=12,
                  dilations=[[1, 2], [4, 8]])

    def train(y_all, epochs, es_optimizer, rnn_optimizer, tag):
        for epoch in range(epochs):
            perm = torch.randperm(n_series)
            losses = []
            for i in range(0, n_series, args.batch_size):
                idx = perm[i:i + args.batch_size]
                es_optimizer.zero_grad()
                rnn_optimizer.zero_grad()
                y_hat, y_target, levels = model(y_all[idx], idx, args.noise_std)
                loss, pinball = smyl_loss(y_hat, y_target, levels, args.tau,
                                          args.level_penalty)
                loss.backward()
                nn.utils.clip_grad_norm_(model.rnn.parameters(), args.clip)
                nn.utils.clip_grad_norm_(model.es.parameters(), args.clip)
                rnn_optimizer.step()
                es_optimizer.step()
                losses.append(pinball.item())
            if epoch % 3 == 0 or epoch == epochs - 1:
                print(f"[{tag}] epoch {epoch:3d}  pinball {sum(losses) / len(losses):.4f}")

    es_optimizer = torch.optim.Adam(model.es.parameters(),
                                    lr=args.lr * args.per_series_lr_multip)
    rnn_optimizer = torch.optim.Adam(model.rnn.parameters(), lr=args.lr)
    train(y_short, args.epochs, es_optimizer, rnn_optimizer, "short")

    # refit on the full history, warm start
    es_optimizer = torch.optim.Adam(model.rnn.parameters(),
                                    lr=0.5 * args.lr * args.per_series_lr_multip)
    rnn_optimizer = torch.optim.Adam(model.rnn.parameters(), lr=0.5 * args.lr)
    train(panel, args.epochs_full, es_optimizer, rnn_optimizer, "full")

    if args.out:
        torch.save({"es": model.es.state_dict(), "rnn": model.rnn.state_dict()}, args.out)


if __name__ == "__main__":
    main()
