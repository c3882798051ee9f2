"""A GAN with the R1 gradient penalty at a tiny size, written after Mescheder, Geiger and
Nowozin, "Which Training Methods for GANs do actually Converge?" (ICML 2018, arXiv:1801.04406),
and the R1 term as NVlabs/stylegan2-ada-pytorch computes it (training/loss.py: the gradient of
the real logits' sum with respect to the real images, ``create_graph=True``, its squared norm
per sample averaged, added to the discriminator's loss times ``r1_gamma / 2``), as in
rosinality/stylegan2-pytorch (train.py, ``d_r1_loss``). Non-saturating (softplus) losses, the
discriminator's step then the generator's, each network with its own Adam, the penalty taken on
every discriminator step (no lazy regularization). ``retain_graph=True`` keeps the real logits'
graph for the discriminator's loss. Data: a mixture of four 2-D Gaussians made in the script.
Injected bug: ``create_graph=False``; the gradient has no graph, the penalty is a constant and
trains nothing. ``--out PATH`` saves both networks' weights."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--latent-dim", type=int, default=4)
parser.add_argument("--gamma", type=float, default=10.0)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(4) * (math.pi / 2)
centers = 2.0 * torch.stack([angles.cos(), angles.sin()], 1)
data = centers[torch.randint(0, 4, (256,))] + 0.1 * torch.randn(256, 2)

generator = nn.Sequential(nn.Linear(args.latent_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))
discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))

for it in range(args.iterations):
    index = torch.randint(0, len(data), (args.batch_size,))
    real_img = data[index].detach().requires_grad_(True)
    z = torch.randn(args.batch_size, args.latent_dim)
    fake_img = generator(z)
    fake_pred = discriminator(fake_img.detach())
    real_pred = discriminator(real_img)
    d_loss = F.softplus(fake_pred).mean() + F.softplus(-real_pred).mean()
    (grad,) = torch.autograd.grad(outputs=real_pred.sum(), inputs=real_img,
                                  create_graph=False, retain_graph=True)
    r1_penalty = grad.pow(2).reshape(grad.shape[0], -1).sum(1).mean()
    loss_D = d_loss + args.gamma / 2 * r1_penalty
    optimizer_D.zero_grad()
    loss_D.backward()
    optimizer_D.step()

    z = torch.randn(args.batch_size, args.latent_dim)
    g_loss = F.softplus(-discriminator(generator(z))).mean()
    optimizer_G.zero_grad()
    g_loss.backward()
    optimizer_G.step()
    print(f"iteration {it} d_loss {d_loss.item():.4f} r1 {r1_penalty.item():.4f} "
          f"g_loss {g_loss.item():.4f}")

if args.out:
    torch.save({"G": generator.state_dict(), "D": discriminator.state_dict()}, args.out)
