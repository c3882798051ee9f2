"""CycleGAN at a tiny size, written after Zhu, Park, Isola and Efros, "Unpaired Image-to-Image
Translation using Cycle-Consistent Adversarial Networks" (ICCV 2017, arXiv:1703.10593),
sections 3-4 (least-squares adversarial losses, the cycle-consistency loss weighted by lambda,
the identity loss, and the discriminators updated from a history of 50 generated images), with
junyanz/pytorch-CycleGAN-and-pix2pix (https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix,
models/cycle_gan_model.py CycleGANModel: one Adam over itertools.chain of netG_A's and netG_B's
parameters and one over netD_A's and netD_B's; forward, backward_G, which reads the fresh fakes
fake_B and fake_A; backward_D_basic, which reads the pooled fake through fake.detach();
optimize_parameters, which sets the discriminators' requires_grad to False for the generators'
step and back to True for theirs; util/image_pool.py ImagePool.query, which keeps image.data and,
once full, hands back a stored image in place of the new one with probability one half). G_A
maps domain A (horizontal stripes) to B (vertical stripes), G_B maps back; D_A tells real B from
G_A(A), D_B real A from G_B(B). The pools are queried right after the forward (the reference
queries them in backward_D_A and backward_D_B, after the generators' step, on the same fakes).
Tiny 4x4 single-channel images, flattened, made in the script; small MLPs.
Injected bug: the discriminators' Adam is built over D_A.parameters() alone, without the
itertools.chain with D_B's, so D_B's loss fills its .grad but D_B is never stepped."""

import argparse
import itertools

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--pool-size", type=int, default=12)
parser.add_argument("--lambda-a", type=float, default=10.0)
parser.add_argument("--lambda-b", type=float, default=10.0)
parser.add_argument("--lambda-identity", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

side, hidden_dim = 4, 32
dim = side * side


def sample(domain, n):
    """Stripes of random phase: rows in domain A, columns in domain B."""
    phase = torch.randint(0, 2, (n, 1, 1))
    stripes = ((torch.arange(side).view(1, side, 1) + phase) % 2).float().expand(n, side, side)
    if domain == "B":
        stripes = stripes.transpose(1, 2)
    return (2 * stripes - 1 + 0.2 * torch.randn(n, side, side)).reshape(n, dim)


class ImagePool:
    """A history of generated images that the discriminators read."""

    def __init__(self, pool_size):
        self.pool_size, self.images = pool_size, []

    def query(self, images):
        returned = []
        for image in images.detach():
            if len(self.images) < self.pool_size:
                self.images.append(image)
                returned.append(image)
            elif torch.rand(()) > 0.5:
                idx = int(torch.randint(0, self.pool_size, ()))
                returned.append(self.images[idx].clone())
                self.images[idx] = image
            else:
                returned.append(image)
        return torch.stack(returned)


def generator():
    return nn.Sequential(nn.Linear(dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, dim),
                         nn.Tanh())


def discriminator():
    return nn.Sequential(nn.Linear(dim, hidden_dim), nn.LeakyReLU(0.2), nn.Linear(hidden_dim, 1))


def set_requires_grad(nets, requires_grad):
    for net in nets:
        for p in net.parameters():
            p.requires_grad = requires_grad


def gan_loss(prediction, target_is_real):
    return F.mse_loss(prediction, torch.full_like(prediction, float(target_is_real)))


G_A, G_B, D_A, D_B = generator(), generator(), discriminator(), discriminator()
fake_A_pool, fake_B_pool = ImagePool(args.pool_size), ImagePool(args.pool_size)
optimizer_G = torch.optim.Adam(itertools.chain(G_A.parameters(), G_B.parameters()),
                               lr=args.lr, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(D_A.parameters(), lr=args.lr, betas=(0.5, 0.999))

for it in range(args.iters):
    real_A, real_B = sample("A", args.batch_size), sample("B", args.batch_size)
    fake_B = G_A(real_A)
    rec_A = G_B(fake_B)
    fake_A = G_B(real_B)
    rec_B = G_A(fake_A)
    pooled_B = fake_B_pool.query(fake_B)  # the history the discriminators read
    pooled_A = fake_A_pool.query(fake_A)
    # the generators, with the discriminators frozen
    set_requires_grad([D_A, D_B], False)
    optimizer_G.zero_grad()
    loss_idt_A = F.l1_loss(G_A(real_B), real_B) * args.lambda_b * args.lambda_identity
    loss_idt_B = F.l1_loss(G_B(real_A), real_A) * args.lambda_a * args.lambda_identity
    loss_G_A = gan_loss(D_A(fake_B), True)
    loss_G_B = gan_loss(D_B(fake_A), True)
    loss_cycle_A = F.l1_loss(rec_A, real_A) * args.lambda_a
    loss_cycle_B = F.l1_loss(rec_B, real_B) * args.lambda_b
    loss_G = loss_G_A + loss_G_B + loss_cycle_A + loss_cycle_B + loss_idt_A + loss_idt_B
    loss_G.backward()
    optimizer_G.step()
    # the discriminators, on fakes drawn from the history pools
    set_requires_grad([D_A, D_B], True)
    optimizer_D.zero_grad()
    loss_D_A = 0.5 * (gan_loss(D_A(real_B), True) + gan_loss(D_A(pooled_B.detach()), False))
    loss_D_A.backward()
    loss_D_B = 0.5 * (gan_loss(D_B(real_A), True) + gan_loss(D_B(pooled_A.detach()), False))
    loss_D_B.backward()
    optimizer_D.step()
    print(f"iter {it} G {loss_G.item():.4f} D_A {loss_D_A.item():.4f} D_B {loss_D_B.item():.4f}")

if args.out:
    torch.save({"G_A": G_A.state_dict(), "G_B": G_B.state_dict(), "D_A": D_A.state_dict(),
                "D_B": D_B.state_dict()}, args.out)
