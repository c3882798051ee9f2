"""Multi-loss weighting by coefficients of variation at a tiny size, written after Groenendijk,
Karaoglu, Gevers and Mensink, "Multi-Loss Weighting with Coefficient of Variations" (WACV 2021,
arXiv:2009.01717; rickgroen/cov-weighting, losses/covweighting_loss.py): each loss's weight is
the coefficient of variation (std / mean) of its loss ratio ``L_t / mean(L)``, normalised to sum
to one (uniform for the first two iterations), from running statistics kept by Welford's
algorithm over the loss values. ``CoVWeighting.update(losses)`` writes the weights and the
statistics and returns nothing; the loop then weights this iteration's losses by
``weighter.alphas``. The weights of one iteration come from the losses of the iterations before
it. A linear estimator of a smooth profile from a noisy one, trained on three losses of the one
prediction (L1, L2 and the L1 of its first differences); profiles made in the script, one SGD
optimizer.
Injected bug: ``update`` lost its ``@torch.no_grad()`` (one line fewer): the weights and the
statistics carry the graphs of the iterations that wrote them, and each loss also trains the
estimator through the earlier iterations' losses (the backward keeps its graph,
``retain_graph=True``, so that the run goes on). The fix is the decorator, above the ``def``.
``--out PATH`` saves the estimator's weights and the weighting's statistics."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

length = 24
grid = torch.linspace(0, 1, length)


def batch(n):
    freq = 1 + 2 * torch.rand(n, 1)
    phase = 6.28 * torch.rand(n, 1)
    clean = torch.sin(6.28 * freq * grid + phase) + 0.5 * freq
    return clean + 0.3 * torch.randn(n, length), clean


class CoVWeighting(nn.Module):
    def __init__(self, n_losses):
        super().__init__()
        self.iteration = -1
        self.register_buffer("alphas", torch.full((n_losses,), 1.0 / n_losses))
        self.register_buffer("mean_L", torch.zeros(n_losses))
        self.register_buffer("mean_l", torch.zeros(n_losses))
        self.register_buffer("S_l", torch.zeros(n_losses))
        self.register_buffer("std_l", torch.zeros(n_losses))

    def update(self, losses):
        self.iteration += 1
        L0 = losses if self.iteration == 0 else self.mean_L
        ratio = losses / L0
        if self.iteration <= 1:
            self.alphas = torch.full_like(losses, 1.0 / len(losses))
        else:
            cov = self.std_l / self.mean_l
            self.alphas = cov / cov.sum()
        keep = 0.0 if self.iteration == 0 else 1.0 - 1.0 / (self.iteration + 1)
        new_mean_l = keep * self.mean_l + (1 - keep) * ratio
        self.S_l = self.S_l + (ratio - self.mean_l) * (ratio - new_mean_l)
        self.mean_l = new_mean_l
        self.std_l = torch.sqrt(self.S_l / (self.iteration + 1) + 1e-8)
        self.mean_L = keep * self.mean_L + (1 - keep) * losses


model = nn.Linear(length, length)
weighter = CoVWeighting(3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for step in range(args.steps):
    noisy, clean = batch(args.batch_size)
    pred = model(noisy)
    losses = torch.stack([F.l1_loss(pred, clean), F.mse_loss(pred, clean),
                          F.l1_loss(pred.diff(dim=1), clean.diff(dim=1))])
    weighter.update(losses)
    loss = (weighter.alphas * losses).sum()
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} weights {weighter.alphas.tolist()}")

if args.out:
    torch.save({"model": model.state_dict(), "weighting": weighter.state_dict()}, args.out)
