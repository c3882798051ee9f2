"""DeepAR: an autoregressive LSTM with a Gaussian likelihood on synthetic seasonal series.

Paper: David Salinas, Valentin Flunkert, Jan Gasthaus and Tim Januschowski, "DeepAR:
Probabilistic forecasting with autoregressive recurrent networks", International Journal of
Forecasting 36(3), 2020, arXiv:1704.04110.
Reference implementations: zhykoties/TimeSeries, model/net.py (Net.forward: embedding of the
series id concatenated with z_{t-1} and covariates, a multi-layer LSTM, linear mu and softplus
sigma heads on the hidden state; loss_fn: Gaussian negative log-likelihood; Net.test: ancestral
sampling) and train.py (train: one pass over the whole training window, loss summed over every
step, zero_grad / backward / step once per batch); awslabs/gluonts,
src/gluonts/torch/model/deepar/module.py (DeepARModel.unroll_lagged_rnn with its param_proj and
mean scaler). The LSTM here is run over each range in one call, as gluonts does; under teacher
forcing this is the same computation as zhykoties' step-by-step loop.

Sixteen synthetic positive series with their own level, phase and noise are cut into training
windows of a conditioning range (24 steps) followed by a prediction range (8 steps). Each window
is divided by a scale nu = 1 + mean of its conditioning range (the paper's scaling; data, no
gradient). At step t the LSTM sees the previous target z_{t-1} / nu (teacher forcing, as in
training in both references), two seasonal covariates, log nu and an embedding of the series
id; a separate Gaussian projection maps the hidden state to (mu, sigma). The negative
log-likelihood is summed over both the conditioning and the prediction range and
backpropagated through time over the whole window, into the LSTM, the embedding and the
projection, which are all in one Adam optimizer. No gradient is cut inside the window; forecasts
are sampled under torch.no_grad() after training.
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
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_SERIES = 16
LENGTH = 200
PERIOD = 12
COND = 24
PRED = 8
WIN = COND + PRED
BATCH = 32
EMB = 4
HID = 24
N_COV = 2


def make_series():
    t = torch.arange(LENGTH + PRED, dtype=torch.float32)
    level = torch.exp(torch.randn(N_SERIES, 1))
    phase = torch.rand(N_SERIES, 1) * 2 * math.pi
    season = 1.0 + 0.5 * torch.sin(2 * math.pi * t / PERIOD + phase)
    trend = 1.0 + 0.002 * t * torch.randn(N_SERIES, 1).abs()
    noise = 1.0 + 0.1 * torch.randn(N_SERIES, LENGTH + PRED)
    z = (level * season * trend * noise).clamp_min(0.01)
    cov = torch.stack([torch.sin(2 * math.pi * t / PERIOD),
                       torch.cos(2 * math.pi * t / PERIOD)], -1)
    return z, cov


class DeepARNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(N_SERIES, EMB)
        self.lstm = nn.LSTM(1 + N_COV + 1 + EMB, HID, num_layers=2, batch_first=True)
        for name, p in self.lstm.named_parameters():
            if "bias" in name:
                p.data[HID:2 * HID].fill_(1.0)

    def forward(self, z_prev, cov, log_nu, sid, state=None):
        # z_prev (B, L), cov (B, L, N_COV), log_nu (B,), sid (B,) -> h (B, L, HID)
        L = z_prev.shape[1]
        static = torch.cat([log_nu[:, None], self.embed(sid)], -1)
        x = torch.cat([z_prev[..., None], cov, static[:, None].expand(-1, L, -1)], -1)
        return self.lstm(x, state)


class GaussianProj(nn.Module):
    def __init__(self, hid):
        super().__init__()
        self.mu = nn.Linear(hid, 1)
        self.presigma = nn.Linear(hid, 1)

    def forward(self, h):
        return self.mu(h).squeeze(-1), F.softplus(self.presigma(h)).squeeze(-1) + 1e-3


def gaussian_nll(mu, sigma, z):
    # summed over time, averaged over the batch
    nll = torch.log(sigma) + 0.5 * ((z - mu) / sigma) ** 2 + 0.5 * math.log(2 * math.pi)
    return nll.sum(1).mean()


def unroll(net, proj, z_in, z_out, cov, log_nu, sid, state):
    h, state = net(z_in, cov, log_nu, sid, state)
    mu, sigma = proj(h)
    return gaussian_nll(mu, sigma, z_out), state


def sample_batch(z, cov):
    sid = torch.randint(0, N_SERIES, (BATCH,))
    start = torch.randint(1, LENGTH - WIN, (BATCH,))
    idx = start[:, None] + torch.arange(WIN)[None]
    target = z[sid[:, None], idx]
    prev = z[sid[:, None], idx - 1]
    nu = 1.0 + target[:, :COND].mean(1)
    return sid, prev / nu[:, None], target / nu[:, None], cov[idx], nu


z_all, cov_all = make_series()
net = DeepARNet()
proj = GaussianProj(HID)
optimizer = torch.optim.Adam(list(net.parameters()) + list(proj.parameters()), lr=1e-2)

for step in range(args.steps):
    sid, z_prev, z_tgt, cov, nu = sample_batch(z_all, cov_all)
    log_nu = nu.log()
    state = (torch.zeros(2, BATCH, HID), torch.zeros(2, BATCH, HID))

    optimizer.zero_grad()
    nll_cond, state = unroll(net, proj, z_prev[:, :COND], z_tgt[:, :COND], cov[:, :COND],
                             log_nu, sid, state)
    nll_pred, _ = unroll(net, proj, z_prev[:, COND:], z_tgt[:, COND:], cov[:, COND:],
                         log_nu, sid, state)
    loss = (nll_cond + nll_pred) / WIN
    loss.backward()
    optimizer.step()

    if step % 15 == 0 or step == args.steps - 1:
        print(f"step {step:3d} nll/step {loss.item():.4f} "
              f"(cond {nll_cond.item() / COND:.4f} pred {nll_pred.item() / PRED:.4f})")

# forecast the PRED points after LENGTH for every series by ancestral sampling
with torch.no_grad():
    n_samp = 20
    s = LENGTH - COND
    sid = torch.arange(N_SERIES)
    nu = 1.0 + z_all[:, s:LENGTH].mean(1)
    log_nu = nu.log()
    cov = cov_all[None].expand(N_SERIES, -1, -1)
    _, state = net(z_all[:, s - 1:LENGTH - 1] / nu[:, None], cov[:, s:LENGTH], log_nu, sid)
    rep = lambda x, d=0: x.repeat_interleave(n_samp, d)
    state = tuple(rep(x, 1) for x in state)
    y = rep(z_all[:, LENGTH - 1] / nu)
    paths = []
    for t in range(PRED):
        cv = rep(cov[:, LENGTH + t:LENGTH + t + 1])
        h, state = net(y[:, None], cv, rep(log_nu), rep(sid), state)
        mu, sigma = proj(h[:, 0])
        y = torch.normal(mu, sigma)
        paths.append(y)
    fc = torch.stack(paths, 1).view(N_SERIES, n_samp, PRED).median(1).values * nu[:, None]
    truth = z_all[:, LENGTH:LENGTH + PRED]
    nd = (fc - truth).abs().sum() / truth.abs().sum()
print(f"forecast ND {nd.item():.4f}")

if args.out:
    torch.save({"net": net.state_dict(), "proj": proj.state_dict()}, args.out)
