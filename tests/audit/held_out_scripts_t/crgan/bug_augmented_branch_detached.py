"""Consistency-regularised GAN (CR-GAN, with balanced consistency regularisation, bCR) on a
tiny 2-D data set, written after Zhang, Zhang, Odena and Lee, "Consistency Regularization for
Generative Adversarial Networks" (ICLR 2020, arXiv:1910.12027), Algorithm 1, and Zhao, Singh,
Lee, Zhang, Odena and Zhang, "Improved Consistency Regularization for GANs" (AAAI 2021,
arXiv:2002.04724) for the balanced form: the discriminator's loss adds lambda_real *
||D(x) - D(T(x))||^2 over real samples x and a semantics-preserving augmentation T, and (bCR)
lambda_fake * ||D(G(z)) - D(T(G(z)))||^2 over the generated samples, both branches of each
difference in the discriminator's graph, so that D is made insensitive to T; the generator is
trained with the usual non-saturating loss -log sigmoid(D(G(z))) and no consistency term. With
the public PyTorch implementation basiclab/Faster-GNGAN-PyTorch
(https://github.com/basiclab/Faster-GNGAN-PyTorch, gans/sngan-cr.py train(): in each of the
n_dis discriminator steps the fakes are made under torch.no_grad() and .detach()ed, net_D_real =
net_D(real), loss_cs = ((net_D_real - net_D(augment_real)) ** 2).mean() keeps both branches in
the graph, loss_all = loss + alpha * loss_cs, then optim_D.zero_grad(), loss_all.backward(),
optim_D.step(); the generator step computes loss_fn(net_D(net_G(z))), then optim_G.zero_grad(),
loss.backward(), optim_G.step(), which also leaves gradients in net_D's .grad that the next
discriminator step's optim_D.zero_grad() clears; utils/regularization.py consistency_loss builds
the augmented real batch from real.detach()). This script follows those steps with the
non-saturating (BCE) loss in place of the hinge loss and with the bCR fake term added. The data
are eight Gaussians on a circle, the augmentation T is a random rotation by a multiple of 45
degrees plus a small jitter (the data's own symmetry), and both networks are small MLPs.
Bug: the augmented branch of the real consistency term is cut from the graph, d_real_aug =
discriminator(augment(real)).detach(), as if D(T(x)) were a fixed target, where
basiclab/Faster-GNGAN-PyTorch's gans/sngan-cr.py train() computes loss_cs = ((net_D_real -
net_D(augment_real)) ** 2).mean() with both branches in the graph (the paper's regulariser
||D(x) - D(T(x))||^2 is minimised over D through both of its arguments): the term
lambda_real * ||D(x) - D(T(x))||^2 then only pulls D(x) towards D(T(x)) and never D(T(x)) towards
D(x), so D is regularised on the real samples but left free to respond differently to their
augmented copies, half of the consistency gradient is lost and the real and fake terms are no
longer balanced, from the first discriminator update on."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--n-dis", type=int, default=2, help="discriminator steps per generator step")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--z-dim", type=int, default=4)
parser.add_argument("--lambda-real", type=float, default=10.0)
parser.add_argument("--lambda-fake", type=float, default=10.0)
parser.add_argument("--lr", type=float, default=2e-4)
parser.add_argument("--out", default=None, help="where to save the generator and discriminator")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden = 64
angles = torch.arange(8) * (2 * math.pi / 8)
centres = 2.0 * torch.stack([angles.cos(), angles.sin()], 1)


def sample_real(n):
    return centres[torch.randint(0, 8, (n,))] + 0.1 * torch.randn(n, 2)


def augment(x):
    """T(x): rotate each point by a random multiple of 45 degrees and jitter it a little."""
    theta = torch.randint(0, 8, (len(x),)) * (2 * math.pi / 8)
    cos, sin = theta.cos().unsqueeze(1), theta.sin().unsqueeze(1)
    rotated = torch.cat([cos * x[:, :1] - sin * x[:, 1:], sin * x[:, :1] + cos * x[:, 1:]], 1)
    return rotated + 0.05 * torch.randn_like(x)


generator = nn.Sequential(nn.Linear(args.z_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU(), nn.Linear(hidden, 2))
discriminator = nn.Sequential(nn.Linear(2, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, hidden),
                              nn.LeakyReLU(0.2), nn.Linear(hidden, 1))
optim_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.5, 0.999))
optim_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.5, 0.999))

for step in range(args.steps):
    # discriminator: non-saturating GAN loss plus the balanced consistency terms
    for _ in range(args.n_dis):
        with torch.no_grad():
            fake = generator(torch.randn(args.batch_size, args.z_dim))
        real = sample_real(args.batch_size)
        d_real = discriminator(real)
        d_fake = discriminator(fake)
        loss_gan = F.softplus(-d_real).mean() + F.softplus(d_fake).mean()
        d_real_aug = discriminator(augment(real)).detach()
        d_fake_aug = discriminator(augment(fake))
        loss_cr_real = (d_real - d_real_aug).pow(2).mean()
        loss_cr_fake = (d_fake - d_fake_aug).pow(2).mean()
        loss_d = loss_gan + args.lambda_real * loss_cr_real + args.lambda_fake * loss_cr_fake
        optim_d.zero_grad()
        loss_d.backward()
        optim_d.step()

    # generator: non-saturating loss, no consistency term
    fake = generator(torch.randn(args.batch_size, args.z_dim))
    loss_g = F.softplus(-discriminator(fake)).mean()
    optim_g.zero_grad()
    loss_g.backward()
    optim_g.step()
    if step % 50 == 0:
        print(f"step {step} loss_d {loss_d.item():.4f} cr_real {loss_cr_real.item():.4f}"
              f" cr_fake {loss_cr_fake.item():.4f} loss_g {loss_g.item():.4f}")

if args.out:
    torch.save({"generator": generator.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
