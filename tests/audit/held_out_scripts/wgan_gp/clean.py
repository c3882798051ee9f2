"""WGAN-GP on a toy distribution at a tiny size, written after Gulrajani et al., "Improved
Training of Wasserstein GANs" (arXiv:1704.00028) and caogang/wgan-gp gan_toy.py: eight
Gaussians in the plane, ``CRITIC_ITERS`` critic steps per generator step, the gradient
penalty ``((||grad D(interpolates)|| - 1) ** 2) * LAMBDA``, Adam with betas (0.5, 0.9), and the
critic's ``requires_grad`` switched off for the generator's step and back on at the top of
each iteration ("to avoid computation"). The critic's three terms are summed into one
``D_cost.backward()`` instead of three backward calls. As published: clean."""

import argparse

import numpy as np
import torch
from torch import autograd, nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=6)
parser.add_argument("--critic-iters", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lambda-gp", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
np.random.seed(args.seed)
torch.manual_seed(args.seed)
DIM = 32


def inf_train_gen():
    centers = [(1, 0), (-1, 0), (0, 1), (0, -1), (0.7, 0.7), (0.7, -0.7), (-0.7, 0.7),
               (-0.7, -0.7)]
    centers = np.array(centers, dtype=np.float32) * 2
    while True:
        picked = centers[np.random.randint(0, 8, args.batch_size)]
        yield picked + 0.02 * np.random.randn(args.batch_size, 2).astype(np.float32)


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.rand(real_data.size(0), 1)
    interpolates = (alpha * real_data + (1 - alpha) * fake_data).requires_grad_(True)
    disc_interpolates = netD(interpolates)
    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones_like(disc_interpolates),
                              create_graph=True, retain_graph=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * args.lambda_gp


netG = nn.Sequential(nn.Linear(2, DIM), nn.ReLU(), nn.Linear(DIM, DIM), nn.ReLU(),
                     nn.Linear(DIM, 2))
netD = nn.Sequential(nn.Linear(2, DIM), nn.ReLU(), nn.Linear(DIM, DIM), nn.ReLU(),
                     nn.Linear(DIM, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
data = inf_train_gen()

for iteration in range(args.iters):
    for p in netD.parameters():
        p.requires_grad = True
    for _iter_d in range(args.critic_iters):
        real_data = torch.from_numpy(next(data))
        netD.zero_grad()
        D_real = netD(real_data).mean()
        noise = torch.randn(args.batch_size, 2)
        fake = netG(noise).detach()
        D_fake = netD(fake).mean()
        gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
        D_cost = D_fake - D_real + gradient_penalty
        D_cost.backward()
        optimizerD.step()

    for p in netD.parameters():
        p.requires_grad = False
    netG.zero_grad()
    fake = netG(torch.randn(args.batch_size, 2))
    G_cost = -netD(fake).mean()
    G_cost.backward()
    optimizerG.step()
    print(f"iteration {iteration} D_cost {D_cost.item():.4f} G_cost {G_cost.item():.4f}")

if args.out:
    torch.save({"netG": netG.state_dict(), "netD": netD.state_dict()}, args.out)
