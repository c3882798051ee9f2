"""Autoregressive neural PDE solver on 1D Burgers, trained with the pushforward trick.

Paper: Johannes Brandstetter, Daniel Worrall, Max Welling, "Message Passing Neural PDE Solvers",
ICLR 2022, arXiv:2202.03376.
Reference implementation: brandstetter-johannes/MP-Neural-PDE-Solvers --
experiments/train_helper.py (training_loop), experiments/train.py (train: the unrolling
curriculum) and experiments/models_cnn.py (BaseCNN: time window in the channels, output added
to the last input frame with cumulative time steps).

Trajectories of the viscous Burgers equation u_t + u u_x = nu u_xx on a periodic grid are made
with an explicit finite-difference solver. A small residual 1D CNN maps a bundle of tw frames
to the next tw frames (temporal bundling). Phase 1 trains one-step prediction from ground-truth
input windows. Phase 2 adds the pushforward trick: for each batch a number of unrolling steps is
drawn, the solver is first rolled forward that many bundles from the true window under
torch.no_grad(), and only the final prediction, made from the solver's own (cut) output, is
compared to the ground truth and back-propagated, so the model learns to correct the
distribution shift of its own outputs without back-propagating through the rollout. Each
batch: zero the gradients, unroll without gradient, predict, RMSE-of-sum loss, backward, AdamW
step.
Bug: the phase-2 rollout is not wrapped in torch.no_grad(), so the loss is back-propagated
through every unrolled solver call (full backpropagation through the rollout) instead of only
through the last prediction.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_traj", type=int, default=48)
parser.add_argument("--nx", type=int, default=32)
parser.add_argument("--t_res", type=int, default=40)
parser.add_argument("--time_window", type=int, default=4)
parser.add_argument("--unrolling", type=int, default=3)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--pre_steps", type=int, default=30)
parser.add_argument("--push_steps", type=int, default=50)
parser.add_argument("--lr", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

NU = 0.05
DT_FRAME = 0.05
SUBSTEPS = 10


def burgers_trajectories(n, nx, t_res):
    x = torch.arange(nx) * (2 * math.pi / nx)
    dx = 2 * math.pi / nx
    u = torch.zeros(n, nx)
    for k in range(1, 4):
        amp = 0.5 * torch.rand(n, 1) / k
        phase = 2 * math.pi * torch.rand(n, 1)
        u = u + amp * torch.sin(k * x[None] + phase)
    frames = [u]
    dt = DT_FRAME / SUBSTEPS
    for _ in range(t_res - 1):
        for _ in range(SUBSTEPS):
            up, um = torch.roll(u, -1, 1), torch.roll(u, 1, 1)
            u = u + dt * (-u * (up - um) / (2 * dx) + NU * (up - 2 * u + um) / dx ** 2)
        frames.append(u)
    return torch.stack(frames, 1)


class BundledCNN(nn.Module):
    def __init__(self, tw, hidden):
        super().__init__()
        self.tw = tw
        conv = dict(padding_mode="circular")
        self.conv1 = nn.Conv1d(tw, hidden, 3, padding=1, **conv)
        self.conv2 = nn.Conv1d(hidden, hidden, 5, padding=2, **conv)
        self.conv3 = nn.Conv1d(hidden, hidden, 5, padding=2, **conv)
        self.conv4 = nn.Conv1d(hidden, tw, 7, padding=3, **conv)
        self.register_buffer("dt", DT_FRAME * torch.arange(1, tw + 1, dtype=torch.float32))

    def forward(self, u):
        h = F.elu(self.conv1(u))
        h = h + F.elu(self.conv2(h))
        h = h + F.elu(self.conv3(h))
        h = self.conv4(h)
        return u[:, -1:, :] + self.dt[None, :, None] * h


def windows(traj, starts, tw):
    data = torch.stack([traj[i, s - tw:s] for i, s in enumerate(starts.tolist())])
    labels = torch.stack([traj[i, s:s + tw] for i, s in enumerate(starts.tolist())])
    return data, labels


traj = burgers_trajectories(args.n_traj, args.nx, args.t_res)
tw = args.time_window
model = BundledCNN(tw, args.hidden)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
criterion = nn.MSELoss(reduction="sum")


def sample_batch(unrolled):
    idx = torch.randint(0, traj.size(0), (args.batch_size,))
    high = args.t_res - tw - tw * unrolled + 1
    starts = torch.randint(tw, high, (args.batch_size,))
    return traj[idx], starts


# phase 1: one-step training from ground-truth windows
for step in range(1, args.pre_steps + 1):
    batch, starts = sample_batch(0)
    data, labels = windows(batch, starts, tw)
    optimizer.zero_grad()
    loss = torch.sqrt(criterion(model(data), labels))
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"pre  step {step:3d}  loss {loss.item():.4f}")

# phase 2: pushforward trick, the unrolled steps carry no gradient
for step in range(1, args.push_steps + 1):
    unrolled = int(torch.randint(0, args.unrolling + 1, (1,)))
    batch, starts = sample_batch(unrolled)
    data, labels = windows(batch, starts, tw)
    optimizer.zero_grad()
    for _ in range(unrolled):
        starts = starts + tw
        _, labels = windows(batch, starts, tw)
        data = model(data)
    pred = model(data)
    loss = torch.sqrt(criterion(pred, labels))
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"push step {step:3d}  unrolled {unrolled}  loss {loss.item():.4f}")

if args.out is not None:
    torch.save({"model": model.state_dict()}, args.out)
