"""A GAN trained with gradient accumulation, at a tiny size, written after Radford, Metz and
Chintala, "Unsupervised Representation Learning with Deep Convolutional Generative Adversarial
Networks" (arXiv:1511.06434) and pytorch/examples (dcgan/main.py: per batch, the discriminator
steps on a real and a detached fake batch, then the generator steps on the non-saturating loss
of the fake batch scored again), with both networks' gradients accumulated over ``--accum``
micro-batches (4 at the defaults) in the common form ``if (i + 1) % accum == 0:`` step, then
clear. The clears set each parameter's ``.grad`` to ``None`` (as ``zero_grad(set_to_none=True)``
does), right after each network's step. The generator's backward pass is given its own
parameters (``inputs=``) so that it leaves the discriminator's accumulated gradient alone. 16
micro-batches: 4 steps of each network. Multilayer perceptrons on 2-d points from a ring of 8
Gaussians made in the script. Adam with ``betas=(0.5, 0.999)``. As published: clean. ``--out
PATH`` saves both networks' state_dicts after the run."""

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
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(8) * (2 * math.pi / 8)
modes = torch.stack([angles.cos(), angles.sin()], 1) * 2


def real_batch():
    return modes[torch.randint(0, 8, (args.batch_size,))] + 0.05 * torch.randn(args.batch_size, 2)


netG = nn.Sequential(nn.Linear(args.nz, 32), nn.ReLU(), nn.Linear(32, 2))
netD = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))
real_label, fake_label = 1.0, 0.0

for i in range(args.iters):
    # (1) the discriminator: maximize log(D(x)) + log(1 - D(G(z)))
    real = real_batch()
    label = torch.full((args.batch_size, 1), real_label)
    errD_real = F.binary_cross_entropy_with_logits(netD(real), label)
    noise = torch.randn(args.batch_size, args.nz)
    fake = netG(noise)
    label = torch.full((args.batch_size, 1), fake_label)
    errD_fake = F.binary_cross_entropy_with_logits(netD(fake.detach()), label)
    errD = errD_real + errD_fake
    (errD / args.accum).backward()
    if (i + 1) % args.accum == 0:
        optimizerD.step()
        for p in netD.parameters():
            p.grad = None
    # (2) the generator: maximize log(D(G(z)))
    label = torch.full((args.batch_size, 1), real_label)
    errG = F.binary_cross_entropy_with_logits(netD(fake), label)
    (errG / args.accum).backward(inputs=list(netG.parameters()))
    if (i + 1) % args.accum == 0:
        optimizerG.step()
        for p in netG.parameters():
            p.grad = None
        print(f"[{i + 1}/{args.iters}] loss D {errD.item():.4f} loss G {errG.item():.4f}")

if args.out:
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict()}, args.out)
