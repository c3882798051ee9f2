"""Echo state network on NARMA-10: ridge-regression readout, then gradient fine-tuning.

Papers: Herbert Jaeger, "The 'echo state' approach to analysing and training recurrent neural
networks", GMD Report 148, German National Research Center for Information Technology, 2001;
Mantas Lukosevicius, "A Practical Guide to Applying Echo State Networks", Neural Networks:
Tricks of the Trade, 2nd ed., Springer LNCS 7700, 2012 (leaky-integrator reservoir, washout,
ridge-regression readout with a bias column); Luca Thiede and Ulrich Parlitz, "Gradient based
hyperparameter optimization in Echo State Networks", Neural Networks 115, 2019 (the input
scaling and the leaking rate tuned by back-propagating the task error through the reservoir).
Reference implementation: stefanonardo/pytorch-esn, torchesn/nn/reservoir.py (Reservoir,
ResTanhCell: h = (1 - a) h + a tanh(W_in u + b + W h), input weights uniform in [-1, 1] times
w_ih_scale, recurrent weights uniform, sparsified and rescaled to the spectral radius) and
torchesn/nn/echo_state_network.py (ESN.forward / ESN.fit: reservoir states under no_grad,
washout, readout fitted by ridge regression on [1, states]; readout_training='gd' for training
it with a PyTorch optimizer instead).

The data is one NARMA-10 series (input u uniform in [0, 0.5], the tenth-order nonlinear
autoregressive target y) of 1200 steps for training and 400 for evaluation. The reservoir has
100 tanh units; its input weights, bias and sparse recurrent matrix (spectral radius 0.9) are
fixed random buffers. Two scalars are learnable: the log input scaling and the logit of the
leaking rate. Phase 1 (Jaeger's method): the states are collected under torch.no_grad() over
the training series, the first 100 are washed out and the linear readout is solved by ridge
regression and written into nn.Linear. Phase 2: 30 Adam updates, each on 16 random windows of
80 steps started from a zero state; the reservoir is run with its graph, the first 30 steps of
every window are washout, and the MSE on the remaining steps is back-propagated through the
reservoir into the input scaling and the leaking rate (one parameter group) and into the
readout (a second group with a smaller learning rate).
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
parser.add_argument("--n_res", type=int, default=100)
parser.add_argument("--spectral_radius", type=float, default=0.9)
parser.add_argument("--density", type=float, default=0.1)
parser.add_argument("--input_scale", type=float, default=0.5)
parser.add_argument("--leaking_rate", type=float, default=0.5)
parser.add_argument("--ridge", type=float, default=1e-6)
parser.add_argument("--washout", type=int, default=100)
parser.add_argument("--updates", type=int, default=30)
parser.add_argument("--window", type=int, default=80)
parser.add_argument("--window_washout", type=int, default=30)
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--lr_hyper", type=float, default=5e-3)
parser.add_argument("--lr_readout", type=float, default=1e-4)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_TRAIN = 1200
N_EVAL = 400


def narma10(length):
    u = 0.5 * torch.rand(length + 10)
    y = [0.0] * (length + 10)
    uu = u.tolist()
    for t in range(9, length + 9):
        y[t + 1] = (0.3 * y[t] + 0.05 * y[t] * sum(y[t - 9:t + 1])
                    + 1.5 * uu[t - 9] * uu[t] + 0.1)
    return u[10:], torch.tensor(y[10:])


class Reservoir(nn.Module):
    def __init__(self, n_in, n_res, spectral_radius, density, input_scale, leaking_rate):
        super().__init__()
        self.n_res = n_res
        self.register_buffer("w_in", torch.empty(n_res, n_in).uniform_(-1, 1))
        self.register_buffer("b_in", torch.empty(n_res).uniform_(-1, 1))
        w = torch.empty(n_res, n_res).uniform_(-1, 1)
        w = w * (torch.rand(n_res, n_res) < density).float()
        w = w * (spectral_radius / torch.linalg.eigvals(w).abs().max())
        self.register_buffer("w_hh", w)
        self.log_input_scale = nn.Parameter(torch.tensor(math.log(input_scale)))
        self.leak_logit = nn.Parameter(torch.tensor(math.log(leaking_rate / (1 - leaking_rate))))

    def forward(self, u, h=None):
        # u (T, B, n_in) -> states (T, B, n_res)
        if h is None:
            h = u.new_zeros(u.shape[1], self.n_res)
        a = torch.sigmoid(self.leak_logit)
        drive = torch.exp(self.log_input_scale) * F.linear(u, self.w_in) + self.b_in
        states = []
        for t in range(u.shape[0]):
            h = (1 - a) * h + a * torch.tanh(drive[t] + F.linear(h, self.w_hh))
            states.append(h)
        return torch.stack(states)


class ESN(nn.Module):
    def __init__(self, n_in, n_res, n_out):
        super().__init__()
        self.reservoir = Reservoir(n_in, n_res, args.spectral_radius, args.density,
                                   args.input_scale, args.leaking_rate)
        self.readout = nn.Linear(n_res, n_out)

    def forward(self, u):
        return self.readout(self.reservoir(u))


def fit_readout(esn, u, y, washout, ridge):
    with torch.no_grad():
        states = esn.reservoir(u[:, None, None])[washout:, 0]
        X = torch.cat([torch.ones(states.shape[0], 1), states], 1)
        X, t = X.double(), y[washout:, None].double()
        A = X.T @ X + ridge * torch.eye(X.shape[1], dtype=X.dtype)
        W = torch.linalg.solve(A, X.T @ t).T.float()
        esn.readout.bias.copy_(W[:, 0])
        esn.readout.weight.copy_(W[:, 1:])


def nrmse(esn, u, y, washout):
    with torch.no_grad():
        pred = esn(u[:, None, None])[washout:, 0, 0]
        return ((pred - y[washout:]).pow(2).mean() / y[washout:].var()).sqrt().item()


def sample_windows(u, y, batch, window):
    start = torch.randint(0, u.shape[0] - window, (batch,))
    idx = start[None, :] + torch.arange(window)[:, None]
    return u[idx][..., None], y[idx]


u_all, y_all = narma10(N_TRAIN + N_EVAL)
u_train, y_train = u_all[:N_TRAIN], y_all[:N_TRAIN]
u_eval, y_eval = u_all[N_TRAIN:], y_all[N_TRAIN:]

esn = ESN(1, args.n_res, 1)

# phase 1: fixed reservoir, readout by ridge regression
fit_readout(esn, u_train, y_train, args.washout, args.ridge)
print(f"ridge readout  eval nrmse {nrmse(esn, u_eval, y_eval, args.washout):.4f}")

# phase 2: tune input scaling and leaking rate through the reservoir, fine-tune the readout
optimizer = torch.optim.Adam([
    {"params": [esn.reservoir.log_input_scale, esn.reservoir.leak_logit],
     "lr": args.lr_hyper},
    {"params": esn.readout.parameters(), "lr": args.lr_readout},
])
for update in range(args.updates):
    u, y = sample_windows(u_train, y_train, args.batch, args.window)
    optimizer.zero_grad()
    pred = esn(u)[args.window_washout:, :, 0]
    loss = F.mse_loss(pred, y[args.window_washout:])
    loss.backward()
    optimizer.step()
    if update % 10 == 0 or update == args.updates - 1:
        print(f"update {update:3d}  mse {loss.item():.5f}  "
              f"input scale {esn.reservoir.log_input_scale.exp().item():.3f}  "
              f"leak {torch.sigmoid(esn.reservoir.leak_logit).item():.3f}")

print(f"fine-tuned     eval nrmse {nrmse(esn, u_eval, y_eval, args.washout):.4f}")

if args.out:
    torch.save({"esn": esn.state_dict()}, args.out)
