"""Relativistic average standard GAN (RaSGAN) at a tiny size, written after Jolicoeur-Martineau,
"The relativistic discriminator: a key element missing from standard GAN" (ICLR 2019,
arXiv:1807.00734), section 4.2 and algorithm 2: the critic C scores a sample against the
average score of the other kind, D(x_r) = sigmoid(C(x_r) - E C(x_f)) and D(x_f) = sigmoid(C(x_f)
- E C(x_r)); the discriminator maximises log D(x_r) + log(1 - D(x_f)) and the generator, unlike
in the standard GAN, the swapped objective log D(x_f) + log(1 - D(x_r)), so that its gradient
also comes through the real half of the batch. With AlexiaJM/RelativisticGAN
(https://github.com/AlexiaJM/RelativisticGAN, code/GAN_losses_iter.py, the fitting loop with
loss_D == 6, RaSGAN: in the discriminator's step y_pred = D(x), the fake batch G(z) copied into
x_fake and scored as D(x_fake.detach()), errD = (BCE_stable(y_pred - mean(y_pred_fake), 1) +
BCE_stable(y_pred_fake - mean(y_pred), 0)) / 2, one backward and optimizerD.step(); then the
discriminator's parameters set to requires_grad = False, and in the generator's step a fresh
fake batch scored with its graph, a fresh real batch through D, errG = (BCE_stable(y_pred -
mean(y_pred_fake), 0) + BCE_stable(y_pred_fake - mean(y_pred), 1)) / 2, backward and
optimizerG.step(); requires_grad = True again at the top of the next iteration). Here both
optimisers are cleared once at the top of each iteration. Data: a ring of eight 2-D Gaussians
made in the script; MLP generator and critic.
Bug: the generator's loss detaches the average fake score, y_pred - y_pred_fake.mean().detach(),
as if the relativistic baseline were a constant (the reference's errG, BCE_stable(y_pred -
torch.mean(y_pred_fake), y2), differentiates the mean of the fake scores), so the half of errG
that pushes the real scores below the average fake one sends no gradient into G: the generator
is trained by the fake-against-average-real term alone and loses the gradient through the real
data that distinguishes RaSGAN from the standard GAN."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

z_dim, hidden = 4, 32
angles = torch.arange(8) * (2 * math.pi / 8)
centers = 2.0 * torch.stack([angles.cos(), angles.sin()], 1)


def sample_real(n):
    """A batch from the ring of eight Gaussians."""
    idx = torch.randint(0, 8, (n,))
    return centers[idx] + 0.1 * torch.randn(n, 2)


G = nn.Sequential(nn.Linear(z_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                  nn.Linear(hidden, 2))
D = nn.Sequential(nn.Linear(2, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, hidden),
                  nn.LeakyReLU(0.2), nn.Linear(hidden, 1))
optimizerD = torch.optim.Adam(D.parameters(), lr=args.lr, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(G.parameters(), lr=args.lr, betas=(0.5, 0.999))
ones = torch.ones(args.batch_size)
zeros = torch.zeros(args.batch_size)

for i in range(args.iters):
    optimizerD.zero_grad()
    optimizerG.zero_grad()
    for p in D.parameters():
        p.requires_grad_(True)

    # (1) the discriminator: real against the average fake, fake against the average real
    x = sample_real(args.batch_size)
    z = torch.randn(args.batch_size, z_dim)
    fake = G(z)
    y_pred = D(x).view(-1)
    y_pred_fake = D(fake.detach()).view(-1)
    errD = (F.binary_cross_entropy_with_logits(y_pred - y_pred_fake.mean(), ones)
            + F.binary_cross_entropy_with_logits(y_pred_fake - y_pred.mean(), zeros)) / 2
    errD.backward()
    optimizerD.step()

    # (2) the generator: the same relativistic scores with the labels swapped
    for p in D.parameters():
        p.requires_grad_(False)
    z = torch.randn(args.batch_size, z_dim)
    fake = G(z)
    y_pred_fake = D(fake).view(-1)
    x = sample_real(args.batch_size)
    y_pred = D(x).view(-1)
    errG = (F.binary_cross_entropy_with_logits(y_pred - y_pred_fake.mean().detach(), zeros)
            + F.binary_cross_entropy_with_logits(y_pred_fake - y_pred.mean(), ones)) / 2
    errG.backward()
    optimizerG.step()
    if i % 20 == 0:
        print(f"iter {i} loss_D {errD.item():.4f} loss_G {errG.item():.4f}")

with torch.no_grad():
    samples = G(torch.randn(256, z_dim))
if args.out:
    torch.save({**{f"G.{k}": v for k, v in G.state_dict().items()},
                **{f"D.{k}": v for k, v in D.state_dict().items()},
                "samples": samples}, args.out)
