"""Latent ODE fitted to noisy 2-d spirals, integrated with a hand-written fixed-step RK4 solver.

Paper: Ricky T. Q. Chen, Yulia Rubanova, Jesse Bettencourt and David Duvenaud, "Neural Ordinary
Differential Equations", NeurIPS 2018, arXiv:1806.07366 (2018), section 5 (a latent ODE
time-series model: an RNN recognition network, an ODE in latent space, a decoder, trained as a
VAE).
Reference implementation: rtqichen/torchdiffeq, examples/latent_ode.py (generate_spiral2d:
clockwise and counter-clockwise Archimedean spirals, a random start index per spiral, Gaussian
observation noise; LatentODEfunc: three ELU-separated linear layers; RecognitionRNN: a tanh RNN
cell i2h over [obs, h] with an h2o head giving the mean and log-variance of q(z0); Decoder: a
two-layer ReLU MLP; the training loop: zero_grad, the RNN run backward in time over the
observations, the reparameterized z0, odeint over samp_ts, log_normal_pdf and normal_kl, the
negative ELBO averaged over spirals, backward and one Adam step over func, dec and rec together)
and torchdiffeq/_impl/fixed_grid.py (RK4: a fixed-grid fourth-order Runge-Kutta step).

The solver is written here in plain torch instead of torchdiffeq's odeint: odeint_rk4 takes
--substeps classic RK4 steps per observation interval and returns the state at every
observation time, so the loss back-propagates through every solver stage into the ODE function,
into z0 and through the reparameterization into the recognition RNN (no adjoint; torchdiffeq's
fixed-grid rk4 uses the 3/8-rule variant, the classic rule is used here). The data are 32
spirals of 16 noisy samples each, made in torch; the latent state has 4 dimensions. One Adam
optimizer holds the ODE function, the decoder and the recognition RNN; each iteration runs
zero_grad, the encoder, the solver, the decoder, the negative ELBO, backward and the Adam step;
the final reconstruction error is computed under torch.no_grad() from the posterior mean.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--niters", type=int, default=30)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--nspiral", type=int, default=32)
parser.add_argument("--ntotal", type=int, default=120)
parser.add_argument("--nsample", type=int, default=16)
parser.add_argument("--noise_std", type=float, default=0.3)
parser.add_argument("--latent_dim", type=int, default=4)
parser.add_argument("--nhidden", type=int, default=20)
parser.add_argument("--rnn_nhidden", type=int, default=25)
parser.add_argument("--substeps", type=int, default=1)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def generate_spiral2d(nspiral, ntotal, nsample, stop=6 * math.pi, noise_std=0.3, a=0.0, b=0.3):
    orig_ts = torch.linspace(0.0, stop, ntotal)
    samp_ts = orig_ts[:nsample]
    zs_cw = stop + 1.0 - orig_ts
    rs_cw = a + b * 50.0 / zs_cw
    traj_cw = torch.stack([rs_cw * torch.cos(zs_cw) - 5.0, rs_cw * torch.sin(zs_cw)], 1)
    rs_cc = a + b * orig_ts
    traj_cc = torch.stack([rs_cc * torch.cos(orig_ts) + 5.0, rs_cc * torch.sin(orig_ts)], 1)
    samp_trajs = []
    for _ in range(nspiral):
        t0_idx = int(torch.randint(nsample, ntotal - nsample, (1,)))
        orig_traj = traj_cc if bool(torch.rand(()) > 0.5) else traj_cw
        samp = orig_traj[t0_idx:t0_idx + nsample].clone()
        samp_trajs.append(samp + torch.randn_like(samp) * noise_std)
    return torch.stack(samp_trajs, 0), samp_ts


class LatentODEfunc(nn.Module):
    def __init__(self, latent_dim, nhidden):
        super().__init__()
        self.elu = nn.ELU()
        self.fc1 = nn.Linear(latent_dim, nhidden)
        self.fc2 = nn.Linear(nhidden, nhidden)
        self.fc3 = nn.Linear(nhidden, latent_dim)
        self.nfe = 0

    def forward(self, t, x):
        self.nfe += 1
        out = self.elu(self.fc1(x))
        out = self.elu(self.fc2(out))
        return self.fc3(out)


class RecognitionRNN(nn.Module):
    def __init__(self, latent_dim, obs_dim, nhidden, nbatch):
        super().__init__()
        self.nhidden = nhidden
        self.nbatch = nbatch
        self.i2h = nn.Linear(obs_dim + nhidden, nhidden)
        self.h2o = nn.Linear(nhidden, latent_dim * 2)

    def forward(self, x, h):
        h = torch.tanh(self.i2h(torch.cat([x, h], 1)))
        return self.h2o(h), h

    def init_hidden(self):
        return torch.zeros(self.nbatch, self.nhidden)


class Decoder(nn.Module):
    def __init__(self, latent_dim, obs_dim, nhidden):
        super().__init__()
        self.fc1 = nn.Linear(latent_dim, nhidden)
        self.fc2 = nn.Linear(nhidden, obs_dim)

    def forward(self, z):
        return self.fc2(torch.relu(self.fc1(z)))


def odeint_rk4(func, y0, ts, substeps):
    """Classic fixed-step RK4; returns the states at ts, shape (len(ts), *y0.shape)."""
    ys = [y0]
    y = y0
    for i in range(len(ts) - 1):
        dt = (ts[i + 1] - ts[i]) / substeps
        t = ts[i]
        for _ in range(substeps):
            k1 = func(t, y)
            k2 = func(t + dt / 2, y + dt / 2 * k1)
            k3 = func(t + dt / 2, y + dt / 2 * k2)
            k4 = func(t + dt, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + dt
        ys.append(y)
    return torch.stack(ys, 0)


def log_normal_pdf(x, mean, logvar):
    const = math.log(2.0 * math.pi)
    return -0.5 * (const + logvar + (x - mean) ** 2 / torch.exp(logvar))


def normal_kl(mu1, lv1, mu2, lv2):
    v1, v2 = torch.exp(lv1), torch.exp(lv2)
    return lv2 / 2 - lv1 / 2 + (v1 + (mu1 - mu2) ** 2) / (2 * v2) - 0.5


def encode(rec, samp_trajs):
    h = rec.init_hidden()
    for t in reversed(range(samp_trajs.size(1))):
        out, h = rec(samp_trajs[:, t, :], h)
    return out[:, :args.latent_dim], out[:, args.latent_dim:]


obs_dim = 2
samp_trajs, samp_ts = generate_spiral2d(args.nspiral, args.ntotal, args.nsample,
                                        noise_std=args.noise_std)

func = LatentODEfunc(args.latent_dim, args.nhidden)
rec = RecognitionRNN(args.latent_dim, obs_dim, args.rnn_nhidden, args.nspiral)
dec = Decoder(args.latent_dim, obs_dim, args.nhidden)
params = list(func.parameters()) + list(dec.parameters()) + list(rec.parameters())
optimizer = torch.optim.Adam(params, lr=args.lr)
noise_logvar = 2.0 * math.log(args.noise_std)

for itr in range(1, args.niters + 1):
    optimizer.zero_grad()
    qz0_mean, qz0_logvar = encode(rec, samp_trajs)
    epsilon = torch.randn(qz0_mean.size())
    z0 = epsilon * torch.exp(0.5 * qz0_logvar) + qz0_mean

    pred_z = odeint_rk4(func, z0, samp_ts, args.substeps).permute(1, 0, 2)
    pred_x = dec(pred_z)

    logpx = log_normal_pdf(samp_trajs, pred_x,
                           torch.full_like(pred_x, noise_logvar)).sum(-1).sum(-1)
    pz0_mean = pz0_logvar = torch.zeros_like(z0)
    analytic_kl = normal_kl(qz0_mean, qz0_logvar, pz0_mean, pz0_logvar).sum(-1)
    loss = torch.mean(-logpx + analytic_kl, dim=0)
    loss.backward()
    optimizer.step()
    if itr % 10 == 0 or itr == 1:
        print(f"iter {itr:3d} -elbo {loss.item():.2f} nfe {func.nfe}")

with torch.no_grad():
    qz0_mean, _ = encode(rec, samp_trajs)
    pred_x = dec(odeint_rk4(func, qz0_mean, samp_ts, args.substeps).permute(1, 0, 2))
    recon = ((pred_x - samp_trajs) ** 2).mean()
print(f"reconstruction mse {recon.item():.4f}")

if args.out:
    torch.save({"func": func.state_dict(), "rec": rec.state_dict(), "dec": dec.state_dict()},
               args.out)
