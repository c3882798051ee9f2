"""A refiner trained adversarially with a history of refined samples for its discriminator, at a
tiny size, written after Shrivastava et al., "Learning from Simulated and Unsupervised Images
through Adversarial Training" (CVPR 2017, arXiv:1612.07828; section 2.2, the refiner's loss: a
realism term from the discriminator plus an L1 self-regularisation to the synthetic input;
section 2.3 and Algorithm 1, "Updating Discriminator using a History of Refined Images": half of
each of the discriminator's fake batches comes from a buffer of earlier refined samples, and
after each update half of the new refined batch replaces random entries of the buffer). The
buffer is a Python list kept for the whole run; it holds ``refined.detach()`` rows, without
graph. Each iteration refines a synthetic batch once, steps the discriminator on the real batch
against the detached refined half and the buffer's half, then steps the refiner through the
discriminator, then stores the rest of the refined batch in the buffer; the losses are logged
as floats in a list. The refiner: the input plus a two-layer residual; the discriminator: two
linear layers. The data, in the script: vectors of 16, synthetic sine waves and real ones with
an offset and noise. 14 iterations. ``--out PATH`` saves both state_dicts."""

import argparse
import random

import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=14)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--buffer-size", type=int, default=32)
parser.add_argument("--reg", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)
random.seed(args.seed)
grid = torch.linspace(0, 6.28, args.dim)


def synthetic_batch():
    phase = 6.28 * torch.rand(args.batch_size, 1)
    return torch.sin(grid + phase)


def real_batch():
    phase = 6.28 * torch.rand(args.batch_size, 1)
    return torch.sin(grid + phase) + 0.3 + 0.1 * torch.randn(args.batch_size, args.dim)


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.residual = nn.Sequential(nn.Linear(args.dim, args.hidden), nn.ReLU(),
                                      nn.Linear(args.hidden, args.dim))

    def forward(self, x):
        return x + self.residual(x)


refiner = Refiner()
disc = nn.Sequential(nn.Linear(args.dim, args.hidden), nn.LeakyReLU(0.2),
                     nn.Linear(args.hidden, 1))
r_opt = optim.Adam(refiner.parameters(), lr=args.lr)
d_opt = optim.Adam(disc.parameters(), lr=args.lr)
half = args.batch_size // 2
history = []
log = []

for it in range(args.iters):
    synthetic = synthetic_batch()
    refined = refiner(synthetic)

    # the discriminator: half of the fakes from the history of refined samples
    fakes = refined.detach()
    if len(history) >= half:
        fakes = torch.cat([fakes[:half], torch.stack(random.sample(history, half))])
    real = real_batch()
    d_real, d_fake = disc(real), disc(fakes)
    d_loss = (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
              + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
    d_opt.zero_grad()
    d_loss.backward()
    d_opt.step()

    # the refiner: realism and self-regularisation
    d_refined = disc(refined)
    realism = F.binary_cross_entropy_with_logits(d_refined, torch.ones_like(d_refined))
    r_loss = realism + args.reg * (refined - synthetic).abs().mean()
    r_opt.zero_grad()
    r_loss.backward()
    r_opt.step()

    # the history: the rest of the refined batch, without graph
    for row in refined.detach()[half:]:
        if len(history) < args.buffer_size:
            history.append(row)
        else:
            history[random.randrange(args.buffer_size)] = row
    log.append((d_loss.item(), r_loss.item()))
    print(f"iter {it}: d {log[-1][0]:.4f} r {log[-1][1]:.4f} history {len(history)}")

if args.out:
    torch.save({"refiner": refiner.state_dict(), "disc": disc.state_dict()}, args.out)
