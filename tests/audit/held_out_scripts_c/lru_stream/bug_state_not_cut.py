"""A linear recurrent unit (LRU) at a tiny size, written after Orvieto, Smith, Gu, Fernando,
Gulcehre, Pascanu and De, "Resurrecting Recurrent Neural Networks for Long Sequences"
(arXiv:2303.06349), its diagonal recurrence with the exponential parametrisation
``lambda = exp(-exp(nu_log))`` and the normalisation ``gamma = sqrt(1 - lambda^2)``
(``x_t = lambda * x_{t-1} + gamma * B u_t``, ``y_t = C x_t + D u_t``), kept real here. Two phases:
first short independent sequences, each from a zero state; then one long input stream cut into
windows, the state carried from one window to the next and detached from its history between
them (truncated backpropagation through time). The target (a slowly decaying filter of the input)
is made in the script. Injected bug: in the second phase the cut between windows is left out (no
``state = state.detach()``), so each window's graph reaches back through every earlier window of
the stream; ``backward(retain_graph=True)`` lets the run go on, and every window trains the
earlier windows' input projections and decays as well."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=8)
parser.add_argument("--windows", type=int, default=12)
parser.add_argument("--window", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--state", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

d_in = 2
mix = torch.tensor([1.0, -0.5])


def target_of(u, y0=None):
    """A slow filter of the input: y_t = 0.9 y_{t-1} + 0.1 (u_t . mix)."""
    y = torch.zeros(u.size(1)) if y0 is None else y0
    ys = []
    for u_t in u:
        y = 0.9 * y + 0.1 * (u_t @ mix)
        ys.append(y)
    return torch.stack(ys).unsqueeze(-1), y


class LRU(nn.Module):
    def __init__(self, d_in, d_state, d_out, r_min=0.4, r_max=0.95):
        super().__init__()
        radius = torch.rand(d_state) * (r_max ** 2 - r_min ** 2) + r_min ** 2
        self.nu_log = nn.Parameter(torch.log(-0.5 * torch.log(radius)))
        self.B = nn.Parameter(torch.randn(d_state, d_in) / d_in ** 0.5)
        self.C = nn.Parameter(torch.randn(d_out, d_state) / d_state ** 0.5)
        self.D = nn.Parameter(torch.zeros(d_out, d_in))

    def forward(self, u, x):
        lam = torch.exp(-torch.exp(self.nu_log))
        gamma = torch.sqrt(1 - lam ** 2)
        ys = []
        for u_t in u:
            x = lam * x + gamma * F.linear(u_t, self.B)
            ys.append(F.linear(x, self.C) + F.linear(u_t, self.D))
        return torch.stack(ys), x


model = LRU(d_in, args.state, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
model.train()

# phase 1: short sequences, each from a zero state
for step in range(args.warmup_steps):
    u = torch.randn(args.window, args.batch_size, d_in)
    y, _ = target_of(u)
    pred, _ = model(u, torch.zeros(args.batch_size, args.state))
    loss = F.mse_loss(pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} loss {loss.item():.5f}")

# phase 2: one long stream, the state carried across windows
state = torch.zeros(args.batch_size, args.state)
y_last = None
for window in range(args.windows):
    u = torch.randn(args.window, args.batch_size, d_in)
    y, y_last = target_of(u, y_last)
    pred, state = model(u, state)
    loss = F.mse_loss(pred, y)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    print(f"window {window} loss {loss.item():.5f}")

if args.out:
    torch.save(model.state_dict(), args.out)
