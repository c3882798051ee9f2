"""A differentiable Kalman filter at a tiny size, written after Haarnoja, Ajay, Levine and
Abbeel, "Backprop KF: Learning Discriminative Deterministic State Estimators" (arXiv:1605.07148):
a learned observation model maps each raw observation to a measurement of the position, and the
filter's noise covariances (process ``Q``, measurement ``R``, through their log-variances) are
learned with it by backpropagating the tracking error through the filter's predict and update
steps (constant-velocity dynamics, ``K = P H^T (H P H^T + R)^-1``). The tracks are long: they are
filtered in windows of ``--window`` steps, the filter's mean and covariance carried from one
window to the next and detached from their history between them, as truncated backpropagation
through time does. Tracks and their high-dimensional noisy observations are made in the script.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--windows", type=int, default=12)
parser.add_argument("--window", type=int, default=8)
parser.add_argument("--tracks", type=int, default=8)
parser.add_argument("--obs-dim", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dt = 0.1
steps = args.windows * args.window
velocity = torch.cumsum(0.3 * torch.randn(steps, args.tracks), 0) * dt + 0.3 * torch.randn(args.tracks)
position = torch.cumsum(velocity * dt, 0)
emission = torch.randn(args.obs_dim)
observations = position.unsqueeze(-1) * emission + 0.2 * torch.randn(steps, args.tracks,
                                                                      args.obs_dim)


class KalmanFilter(nn.Module):
    def __init__(self, obs_dim):
        super().__init__()
        self.observation_model = nn.Linear(obs_dim, 1)
        self.log_q = nn.Parameter(torch.full((2,), -2.0))
        self.log_r = nn.Parameter(torch.zeros(1))
        self.register_buffer("F", torch.tensor([[1.0, dt], [0.0, 1.0]]))
        self.register_buffer("H", torch.tensor([[1.0, 0.0]]))

    def forward(self, obs, mean, cov):
        Q, R = torch.diag(self.log_q.exp()), self.log_r.exp()
        estimates = []
        for o in obs:
            z = self.observation_model(o)
            mean = mean @ self.F.t()
            cov = self.F @ cov @ self.F.t() + Q
            S = self.H @ cov @ self.H.t() + R
            K = cov @ self.H.t() / S
            mean = mean + (z - mean @ self.H.t()) @ K.transpose(-1, -2)
            cov = (torch.eye(2) - K @ self.H) @ cov
            estimates.append(mean[..., 0])
        return torch.stack(estimates), mean, cov


kf = KalmanFilter(args.obs_dim)
optimizer = torch.optim.Adam(kf.parameters(), lr=5e-2)
kf.train()
mean, cov = torch.zeros(args.tracks, 2), torch.eye(2)
for window in range(args.windows):
    span = slice(window * args.window, (window + 1) * args.window)
    mean, cov = mean.detach(), cov.detach()
    estimates, mean, cov = kf(observations[span], mean, cov)
    loss = F.mse_loss(estimates, position[span])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"window {window} loss {loss.item():.4f} r {kf.log_r.exp().item():.3f}")

if args.out:
    torch.save(kf.state_dict(), args.out)
