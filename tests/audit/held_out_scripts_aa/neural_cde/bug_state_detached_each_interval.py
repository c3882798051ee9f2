"""Neural controlled differential equation classifying the chirality of noisy 2-D spirals.

Paper: Patrick Kidger, James Morrill, James Foster and Terry Lyons, "Neural Controlled
Differential Equations for Irregular Time Series", NeurIPS 2020, arXiv:2005.08926.
Reference implementation: patrick-kidger/torchcde, example/time_series_classification.py
(CDEFunc: z -> linear1 -> relu -> linear2 -> tanh, viewed as a hidden x input matrix;
NeuralCDE.forward: z0 = initial(X(t0)), cdeint over the interpolated path, readout of the
terminal state; get_data: clockwise and anticlockwise spirals with time as a channel; main:
Adam over model.parameters(), binary cross-entropy, backward / step / zero_grad per batch).
The path is the piecewise-linear interpolation of the observations (torchcde.LinearInterpolation)
and cdeint is replaced by a hand-written fixed-step RK4 solver, one step per observation
interval, on dz/dt = f(z) dX/dt with dX/dt constant inside each interval.

Sixty-four spirals of 12 observations on [0, 4 pi] (half of them mirrored, i.e. turning the
other way, with a random start angle and small noise) are the training set; a fresh draw of 64
is the test set. Each observation is (t, x, y). The hidden state has 8 channels and the vector
field a 32-unit hidden layer. The whole solve is backpropagated through (no gradient is cut
inside the unroll) into the vector field, the initial map and the linear readout, which are all
in one Adam optimizer (lr 1e-2, minibatches of 32, 12 epochs = 24 updates).
Bug: the solver detaches the hidden state at the start of every interval, as truncated
backpropagation through an RNN would, so the loss on the terminal state reaches the vector field
only through the last RK4 step and never reaches the initial map.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--epochs", type=int, default=12)
parser.add_argument("--batch", type=int, default=32)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_SEQ = 64
N_OBS = 12
INPUT_CH = 3
HIDDEN_CH = 8
VF_WIDTH = 32


def get_data():
    t = torch.linspace(0.0, 4 * math.pi, N_OBS)
    start = torch.rand(N_SEQ) * 2 * math.pi
    x_pos = torch.cos(start[:, None] + t[None]) / (1 + 0.5 * t)
    y_pos = torch.sin(start[:, None] + t[None]) / (1 + 0.5 * t)
    x_pos[: N_SEQ // 2] *= -1
    x_pos = x_pos + 0.01 * torch.randn_like(x_pos)
    y_pos = y_pos + 0.01 * torch.randn_like(y_pos)
    X = torch.stack([t[None].expand(N_SEQ, -1), x_pos, y_pos], dim=2)
    y = torch.zeros(N_SEQ)
    y[: N_SEQ // 2] = 1.0
    perm = torch.randperm(N_SEQ)
    return t, X[perm], y[perm]


class CDEFunc(nn.Module):
    """f_theta(z): a (hidden x input) matrix for every state z."""

    def __init__(self, input_channels, hidden_channels):
        super().__init__()
        self.input_channels = input_channels
        self.hidden_channels = hidden_channels
        self.linear1 = nn.Linear(hidden_channels, VF_WIDTH)
        self.linear2 = nn.Linear(VF_WIDTH, input_channels * hidden_channels)

    def forward(self, z):
        z = self.linear2(F.relu(self.linear1(z))).tanh()
        return z.view(z.size(0), self.hidden_channels, self.input_channels)


def cdeint_linear_rk4(func, z0, t, X):
    """Solve dz = f(z) dX along the piecewise-linear interpolation of X (batch, len, ch).

    On each interval [t_i, t_{i+1}] the path is linear, so dX/dt is constant there and the CDE
    becomes the ODE dz/dt = f(z) dX/dt, integrated by one classical RK4 step.
    """
    z = z0
    for i in range(t.shape[0] - 1):
        z = z.detach()
        h = t[i + 1] - t[i]
        dXdt = ((X[:, i + 1] - X[:, i]) / h).unsqueeze(-1)

        def vf(z_):
            return torch.bmm(func(z_), dXdt).squeeze(-1)

        k1 = vf(z)
        k2 = vf(z + 0.5 * h * k1)
        k3 = vf(z + 0.5 * h * k2)
        k4 = vf(z + h * k3)
        z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return z


class NeuralCDE(nn.Module):
    def __init__(self, input_channels, hidden_channels, output_channels):
        super().__init__()
        self.func = CDEFunc(input_channels, hidden_channels)
        self.initial = nn.Linear(input_channels, hidden_channels)
        self.readout = nn.Linear(hidden_channels, output_channels)

    def forward(self, t, X):
        z0 = self.initial(X[:, 0])
        z_T = cdeint_linear_rk4(self.func, z0, t, X)
        return self.readout(z_T)


t, train_X, train_y = get_data()
_, test_X, test_y = get_data()

model = NeuralCDE(INPUT_CH, HIDDEN_CH, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(args.epochs):
    for b in range(0, N_SEQ, args.batch):
        batch_X = train_X[b:b + args.batch]
        batch_y = train_y[b:b + args.batch]
        pred_y = model(t, batch_X).squeeze(-1)
        loss = F.binary_cross_entropy_with_logits(pred_y, batch_y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    if epoch % 5 == 0 or epoch == args.epochs - 1:
        print(f"epoch {epoch:3d} bce {loss.item():.4f}")

with torch.no_grad():
    pred_y = model(t, test_X).squeeze(-1)
    acc = ((pred_y > 0).float() == test_y).float().mean()
print(f"test accuracy {acc.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
