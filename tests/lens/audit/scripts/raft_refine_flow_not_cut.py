"""A RAFT-style recurrent refinement of a flow, in one dimension and at a tiny size, after Teed
and Deng, "RAFT: Recurrent All-Pairs Field Transforms for Optical Flow" (ECCV 2020,
arXiv:2003.12039, Section 3.3 and eq. 7; princeton-vl/RAFT, ``RAFT.forward`` in core/raft.py,
which detaches the coordinates at the start of every refinement iteration). A feature encoder
embeds two signals, the second a shift of the first; a context encoder gives the update
operator's context and its first hidden state. Each refinement iteration looks up the second
signal's features around the current estimate (linear interpolation, a window of offsets), a
convolutional recurrent update reads the lookup, the estimate and the context and adds a
correction; every iterate is in the loss, with weights decaying toward the first (eq. 7). The
hidden state carries gradient across iterations, the estimate does not: the published code cuts
it where each iteration begins, so each correction is trained as a step from a constant. The
bug: the estimate is not cut, so the loss trains every update through the later ones. Data:
random sinusoids and their shifts, made in the script. ``--out PATH`` saves the weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--iters", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.8)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

LENGTH, CHANNELS, HIDDEN, RADIUS, BATCH = 24, 8, 8, 2, 8
positions = torch.arange(LENGTH, dtype=torch.float32)


def batch(n):
    """Two signals, the second the first shifted by the true flow (one per signal)."""
    freq, phase = 0.2 + 0.6 * torch.rand(n, 3, 1), 6.3 * torch.rand(n, 3, 1)
    flow = 4 * torch.rand(n, 1, 1) - 2
    first = torch.sin(freq * positions + phase).sum(1, keepdim=True)
    second = torch.sin(freq * (positions - flow) + phase).sum(1, keepdim=True)
    return first, second, flow.expand(n, 1, LENGTH)


def lookup(features, coords):
    """The features at ``coords + r`` for each offset ``r`` of the window, interpolated."""
    offsets = torch.arange(-RADIUS, RADIUS + 1, dtype=torch.float32).view(1, -1, 1)
    where = (coords + offsets) / (LENGTH - 1) * 2 - 1
    grid = torch.stack([where, torch.zeros_like(where)], dim=-1).flatten(1, 2).unsqueeze(1)
    out = F.grid_sample(features.unsqueeze(2), grid, align_corners=True)
    return out.view(features.shape[0], CHANNELS, 2 * RADIUS + 1, LENGTH)


class Update(nn.Module):
    def __init__(self):
        super().__init__()
        inputs = HIDDEN + HIDDEN + 2 * RADIUS + 1 + 1
        self.gate = nn.Conv1d(inputs, HIDDEN, 3, padding=1)
        self.cand = nn.Conv1d(inputs, HIDDEN, 3, padding=1)
        self.head = nn.Conv1d(HIDDEN, 1, 3, padding=1)

    def forward(self, hidden, context, corr, flow):
        x = torch.cat([hidden, context, corr, flow], dim=1)
        gate = torch.sigmoid(self.gate(x))
        hidden = (1 - gate) * hidden + gate * torch.tanh(self.cand(x))
        return hidden, self.head(hidden)


fnet = nn.Sequential(nn.Conv1d(1, CHANNELS, 5, padding=2), nn.ReLU(),
                     nn.Conv1d(CHANNELS, CHANNELS, 3, padding=1))
cnet = nn.Conv1d(1, 2 * HIDDEN, 5, padding=2)
update = Update()
optimizer = torch.optim.Adam([*fnet.parameters(), *cnet.parameters(), *update.parameters()],
                             lr=args.lr)

for step in range(args.steps):
    first, second, true_flow = batch(BATCH)
    f1, f2 = fnet(first), fnet(second)
    hidden, context = cnet(first).chunk(2, dim=1)
    hidden, context = torch.tanh(hidden), torch.relu(context)
    flow = torch.zeros(BATCH, 1, LENGTH)
    predictions = []
    for _ in range(args.iters):
        coords = positions + flow
        corr = (lookup(f2, coords) * f1.unsqueeze(2)).mean(1)
        hidden, delta = update(hidden, context, corr, coords - positions)
        flow = coords - positions + delta
        predictions.append(flow)
    loss = sum(args.gamma ** (args.iters - i - 1) * (pred - true_flow).abs().mean()
               for i, pred in enumerate(predictions))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} end-point error "
          f"{(predictions[-1] - true_flow).abs().mean().item():.4f}")

if args.out:
    torch.save({**{f"fnet.{k}": v for k, v in fnet.state_dict().items()},
                **{f"cnet.{k}": v for k, v in cnet.state_dict().items()},
                **{f"update.{k}": v for k, v in update.state_dict().items()}}, args.out)
