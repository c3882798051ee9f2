"""CycleGAN with gradient accumulation, at a tiny size, written after Zhu, Park, Isola and Efros,
"Unpaired Image-to-Image Translation using Cycle-Consistent Adversarial Networks"
(arXiv:1703.10593) and junyanz/pytorch-CycleGAN-and-pix2pix (models/cycle_gan_model.py,
``optimize_parameters``: the forward pass makes ``fake_B = G_A(real_A)``, ``rec_A =
G_B(fake_B)``, ``fake_A = G_B(real_B)``, ``rec_B = G_A(fake_A)``; the two generators, one
optimizer over both, are stepped first with the discriminators' parameters set not to require
grad (``set_requires_grad``), on the least-squares GAN loss, the cycle loss and the identity
loss; then the two discriminators, one optimizer over both, on real images and on fakes drawn
from a history of earlier fakes, ``backward_D_basic`` reading ``fake.detach()``;
util/image_pool.py, ``ImagePool.query``: the pool keeps copies without graph of earlier fakes
and returns, once full, an old one in place of the new one half of the time). Here each
optimizer accumulates its gradient over ``--accum`` batches (2 at the defaults) and steps under
``if (i + 1) % accum == 0:``, ``zero_grad()`` right after each step; the discriminators read,
after the generators' step of a window's last batch, fakes made before it. Two domains of 2-d
points (a ring and a square's corners) made in the script; multilayer perceptrons; a pool of
4; Adam with ``betas=(0.5, 0.999)``. ``--out PATH`` saves the four networks' state_dicts."""

import argparse
import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=6)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--pool-size", type=int, default=4)
parser.add_argument("--lambda-cycle", type=float, default=10.0)
parser.add_argument("--lambda-identity", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

corners = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])


def batch_A():
    angle = 2 * math.pi * torch.rand(args.batch_size)
    return torch.stack([angle.cos(), angle.sin()], 1) + 0.05 * torch.randn(args.batch_size, 2)


def batch_B():
    picked = corners[torch.randint(0, 4, (args.batch_size,))]
    return picked + 0.05 * torch.randn(args.batch_size, 2)


def generator():
    return nn.Sequential(nn.Linear(2, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 2))


def discriminator():
    return nn.Sequential(nn.Linear(2, args.hidden), nn.LeakyReLU(0.2), nn.Linear(args.hidden, 1))


class ImagePool:
    """A history of generated samples, kept without their graph."""

    def __init__(self, pool_size):
        self.pool_size = pool_size
        self.images = []

    def query(self, images):
        return_images = []
        for image in images.detach():
            image = image.unsqueeze(0)
            if len(self.images) < self.pool_size:
                self.images.append(image)
                return_images.append(image)
            elif torch.rand(()) < 0.5:
                pick = int(torch.randint(0, self.pool_size, ()))
                return_images.append(self.images[pick].clone())
                self.images[pick] = image
            else:
                return_images.append(image)
        return torch.cat(return_images, 0)


def set_requires_grad(nets, requires_grad):
    for net in nets:
        for p in net.parameters():
            p.requires_grad = requires_grad


netG_A, netG_B = generator(), generator()
netD_A, netD_B = discriminator(), discriminator()
optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()),
                               lr=args.lr, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()),
                               lr=args.lr, betas=(0.5, 0.999))
fake_A_pool, fake_B_pool = ImagePool(args.pool_size), ImagePool(args.pool_size)


def gan_loss(prediction, target_is_real):
    target = torch.ones_like(prediction) if target_is_real else torch.zeros_like(prediction)
    return F.mse_loss(prediction, target)


def backward_D_basic(netD, real, fake):
    loss_D = (gan_loss(netD(real), True) + gan_loss(netD(fake.detach()), False)) * 0.5
    (loss_D / args.accum).backward()
    return loss_D


for i in range(args.iters):
    end_of_window = (i + 1) % args.accum == 0
    real_A, real_B = batch_A(), batch_B()
    fake_B = netG_A(real_A)
    rec_A = netG_B(fake_B)
    fake_A = netG_B(real_B)
    rec_B = netG_A(fake_A)

    # G_A and G_B
    set_requires_grad([netD_A, netD_B], False)
    idt_A = netG_A(real_B)
    idt_B = netG_B(real_A)
    loss_idt = (F.l1_loss(idt_A, real_B) + F.l1_loss(idt_B, real_A)) * args.lambda_cycle
    loss_cycle = (F.l1_loss(rec_A, real_A) + F.l1_loss(rec_B, real_B)) * args.lambda_cycle
    loss_G = (gan_loss(netD_A(fake_B), True) + gan_loss(netD_B(fake_A), True) + loss_cycle
              + args.lambda_identity * loss_idt)
    (loss_G / args.accum).backward()
    if end_of_window:
        optimizer_G.step()
        optimizer_G.zero_grad()

    # D_A and D_B
    set_requires_grad([netD_A, netD_B], True)
    loss_D_A = backward_D_basic(netD_A, real_B, fake_B_pool.query(fake_B))
    loss_D_B = backward_D_basic(netD_B, real_A, fake_A_pool.query(fake_A))
    if end_of_window:
        optimizer_D.step()
        optimizer_D.zero_grad()
        print(f"[{i + 1}/{args.iters}] G {loss_G.item():.4f} D_A {loss_D_A.item():.4f} "
              f"D_B {loss_D_B.item():.4f}")

if args.out:
    torch.save({"netG_A": netG_A.state_dict(), "netG_B": netG_B.state_dict(),
                "netD_A": netD_A.state_dict(), "netD_B": netD_B.state_dict()}, args.out)
