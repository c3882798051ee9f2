"""A learned tracking filter at a tiny size, written after Revach et al., "KalmanNet: Neural
Network Aided Kalman Filtering for Partially Known Dynamics" (IEEE Trans. Signal Processing 70,
2022; https://github.com/KalmanNet/KalmanNet_TSP): a network steps a state estimate along a
track, each call reading that step's observation and the estimate the call before made (a prior
of zeros before the first), trained by backpropagation through the whole track. Here the loss
reads the estimate at the end of each track only, and tracks have a random length (1 to 4
steps, a batch of one length each iteration). Data: noisy observations of points moving at a
constant velocity, made in the script. A recurrent cell fed its own output, per time step, on
new observations: no finding."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=10)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

BATCH, LONGEST = 16, 4


class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Sequential(nn.Linear(2 + 4, 32), nn.Tanh(), nn.Linear(32, 4))

    def forward(self, observation, estimate):
        # the innovation against the predicted position, weighed by a learned gain
        predicted = torch.cat((estimate[:, :2] + estimate[:, 2:], estimate[:, 2:]), -1)
        return predicted + self.gain(torch.cat((observation - predicted[:, :2], estimate), -1))


tracker = Tracker()
optimizer = torch.optim.Adam(tracker.parameters(), lr=1e-2)
for iteration in range(args.iterations):
    length = int(torch.randint(1, LONGEST + 1, ()))
    start, velocity = torch.randn(BATCH, 2), 0.3 * torch.randn(BATCH, 2)
    times = torch.arange(1, length + 1).float()[None, :, None]
    positions = start[:, None] + times * velocity[:, None]
    observations = positions + 0.1 * torch.randn(BATCH, length, 2)
    estimate = torch.zeros(BATCH, 4)
    for t in range(length):
        estimate = tracker(observations[:, t], estimate)
    loss = F.mse_loss(estimate, torch.cat((positions[:, -1], velocity), -1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {iteration} length {length} loss {loss.item():.4f}")

if args.out:
    torch.save(tracker.state_dict(), args.out)
