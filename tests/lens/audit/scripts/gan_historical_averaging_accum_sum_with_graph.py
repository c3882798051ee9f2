"""A GAN whose discriminator is held near the average of its past weights, with gradient
accumulation, at a tiny size, written after Salimans et al., "Improved Techniques for Training
GANs" (NeurIPS 2016, arXiv:1606.03498, section 3.3: historical averaging, the term
``|| theta - (1/t) sum_i theta[i] ||**2`` added to a player's cost) and torchgan/torchgan
(torchgan/losses/historical.py, ``HistoricalAverageDiscriminatorLoss``: the sum of the past
parameters kept in ``sum_parameters``, started from a copy of the initial ones, the term
measured against ``sum / timesteps``, and each parameter's current value added to the sum
after the term is made), in the loop of pytorch/examples (dcgan/main.py: one fake batch, the
discriminator's step on a real batch and on ``fake.detach()``, then the generator's step on
``netD(fake)``). Here the term, weighted by ``--lam``, is added to the discriminator's loss on
every batch; both networks accumulate over ``--accum`` batches (4 at the defaults) and step
under ``if (i + 1) % accum == 0:``, ``zero_grad()`` after each step; after each step of the
discriminator the sum takes its new weights and the count grows by one. The generator's loss
is backpropagated with the discriminator's parameters set not to require grad, after the
discriminator's step of the batch: the fake batch was made before it. 16 batches of 2-d points
from a ring of 8 Gaussians made in the script; multilayer perceptrons; Adam. ``--out PATH``
saves both networks' state_dicts and the sum."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=16)
parser.add_argument("--accum", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--nz", type=int, default=4)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--lam", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(8) * (2 * math.pi / 8)
modes = torch.stack([angles.cos(), angles.sin()], 1) * 2


def real_batch():
    picked = modes[torch.randint(0, 8, (args.batch_size,))]
    return picked + 0.05 * torch.randn(args.batch_size, 2)


netG = nn.Sequential(nn.Linear(args.nz, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 2))
netD = nn.Sequential(nn.Linear(2, args.hidden), nn.LeakyReLU(0.2), nn.Linear(args.hidden, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))
total = {name: p.detach().clone() for name, p in netD.named_parameters()}
timesteps = 1


def bce(logits, value):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, value))


for i in range(args.iters):
    end_of_window = (i + 1) % args.accum == 0
    fake = netG(torch.randn(args.batch_size, args.nz))

    # the discriminator, held near its historical average
    errD = bce(netD(real_batch()), 1.0) + bce(netD(fake.detach()), 0.0)
    history = sum(((p - total[name] / timesteps) ** 2).sum()
                  for name, p in netD.named_parameters())
    ((errD + args.lam * history) / args.accum).backward()
    if end_of_window:
        optimizerD.step()
        optimizerD.zero_grad()
        for name, p in netD.named_parameters():
            total[name] += p
        timesteps += 1

    # the generator, the discriminator held fixed
    for p in netD.parameters():
        p.requires_grad = False
    errG = bce(netD(fake), 1.0)
    (errG / args.accum).backward()
    for p in netD.parameters():
        p.requires_grad = True
    if end_of_window:
        optimizerG.step()
        optimizerG.zero_grad()
        print(f"[{i + 1}/{args.iters}] D {errD.item():.4f} history {history.item():.6f} "
              f"G {errG.item():.4f}")

if args.out:
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict(),
                "total": {name: t.detach() for name, t in total.items()}}, args.out)
