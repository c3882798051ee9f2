"""A structured prediction energy network trained end to end through its unrolled
gradient-descent inference, at a tiny size, written after Belanger, Yang and McCallum,
"End-to-End Learning for Structured Prediction Energy Networks" (ICML 2017, arXiv:1703.05667;
davidBelanger/SPEN, optimize/UnrolledGradientOptimizer.lua): multi-label prediction, where an
energy over the labels (local terms from the input plus a learned global term over the labels
jointly) is minimised by ``--steps`` steps of gradient descent on the labels' logits with a
learned step size, from the local terms' logits, the steps unrolled (``torch.autograd.grad(...,
create_graph=True)``), and the loss compares the last iterate's labels with the true ones. The
loss is differentiated through every inference step, on purpose: that is how the energy and the
step size learn to make inference land on the right labels. No cut belongs anywhere. Data:
random inputs made in the script whose labels are correlated (each pair of labels shares a
latent cause). ``--out PATH`` saves every trained tensor."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

BATCH, FEATURES, LABELS, HIDDEN = 16, 10, 6, 12

mixing = torch.randn(FEATURES, LABELS // 2)


def make_batch():
    x = torch.randn(BATCH, FEATURES)
    cause = (x @ mixing + 0.3 * torch.randn(BATCH, LABELS // 2) > 0).float()
    return x, cause.repeat_interleave(2, 1)


class EnergyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.local = nn.Linear(FEATURES, LABELS)
        self.label_energy = nn.Sequential(nn.Linear(LABELS, HIDDEN), nn.Softplus(),
                                          nn.Linear(HIDDEN, 1))
        self.log_step = nn.Parameter(torch.tensor(0.0))

    def energy(self, x, labels):
        return -(self.local(x) * labels).sum(1) + self.label_energy(labels).squeeze(1)

    def forward(self, x):
        """The labels' probabilities after the unrolled inference."""
        logits = self.local(x)
        for _ in range(args.steps):
            energy = self.energy(x, logits.sigmoid()).sum()
            grad, = torch.autograd.grad(energy, logits, create_graph=True)
            logits = logits - self.log_step.exp() * grad
        return logits.sigmoid()


model = EnergyNet()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for it in range(args.iters):
    x, labels = make_batch()
    loss = F.binary_cross_entropy(model(x), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in model.named_parameters()}, args.out)
