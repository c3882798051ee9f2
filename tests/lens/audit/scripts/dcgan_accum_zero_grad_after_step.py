"""A GAN with both networks' gradients accumulated, at a tiny size, written after Radford, Metz
and Chintala, "Unsupervised Representation Learning with Deep Convolutional Generative
Adversarial Networks" (arXiv:1511.06434) and pytorch/examples (dcgan/main.py: per batch, one
fake batch ``fake = netG(noise)``; the discriminator's loss on a real batch and on
``fake.detach()``, its step; then the generator's non-saturating loss on ``netD(fake)``, its
step). Here each network accumulates its gradient over ``--accum`` batches (3 at the defaults)
and steps under ``if (i + 1) % accum == 0:``, each optimizer's ``zero_grad()`` right after its
step. The discriminator's parameters are set not to require grad while the generator's loss
is made and backpropagated (as pytorch-CycleGAN-and-pix2pix's ``set_requires_grad`` does), so
that the generator's backward pass adds nothing to the discriminator's accumulated gradient.
The fake batch is made before the discriminator's step of a window's last batch, and the
generator's loss reaches it after that step: its graph covers the generator only. 12 batches:
4 steps of each network. Multilayer perceptrons on 2-d points from a ring of 8 Gaussians made
in the script; Adam with ``betas=(0.5, 0.999)``. ``--out PATH`` saves both networks'
state_dicts after the run."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--accum", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--nz", type=int, default=4)
parser.add_argument("--ngf", type=int, default=32)
parser.add_argument("--ndf", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(8) * (2 * math.pi / 8)
modes = torch.stack([angles.cos(), angles.sin()], 1) * 2


def real_batch():
    picked = modes[torch.randint(0, 8, (args.batch_size,))]
    return picked + 0.05 * torch.randn(args.batch_size, 2)


netG = nn.Sequential(nn.Linear(args.nz, args.ngf), nn.ReLU(), nn.Linear(args.ngf, 2))
netD = nn.Sequential(nn.Linear(2, args.ndf), nn.LeakyReLU(0.2), nn.Linear(args.ndf, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))
real_label, fake_label = 1.0, 0.0

for i in range(args.iters):
    end_of_window = (i + 1) % args.accum == 0
    noise = torch.randn(args.batch_size, args.nz)
    fake = netG(noise)

    # (1) the discriminator: maximize log(D(x)) + log(1 - D(G(z)))
    real = real_batch()
    label = torch.full((args.batch_size, 1), real_label)
    errD_real = F.binary_cross_entropy_with_logits(netD(real), label)
    label = torch.full((args.batch_size, 1), fake_label)
    errD_fake = F.binary_cross_entropy_with_logits(netD(fake.detach()), label)
    errD = errD_real + errD_fake
    (errD / args.accum).backward()
    if end_of_window:
        optimizerD.step()
        optimizerD.zero_grad()

    # (2) the generator: maximize log(D(G(z))), the discriminator held fixed
    for p in netD.parameters():
        p.requires_grad = False
    label = torch.full((args.batch_size, 1), real_label)
    errG = F.binary_cross_entropy_with_logits(netD(fake), label)
    (errG / args.accum).backward()
    for p in netD.parameters():
        p.requires_grad = True
    if end_of_window:
        optimizerG.step()
        optimizerG.zero_grad()
        print(f"[{i + 1}/{args.iters}] loss D {errD.item():.4f} loss G {errG.item():.4f}")

if args.out:
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict()}, args.out)
