"""GAN inversion by latent optimisation, on a tiny GAN trained first in the same script, written
after Abdal, Qin and Wonka, "Image2StyleGAN: How to Embed Images Into the StyleGAN Latent Space?"
(ICCV 2019, arXiv:1904.03189) and the projection step of Zhu, Kraehenbuehl, Shechtman and Efros,
"Generative Visual Manipulation on the Natural Image Manifold" (ECCV 2016, arXiv:1609.03552): a
target x is embedded by minimising the reconstruction error ||G(z) - x||^2 over the latent code z
alone, with gradient descent through the frozen generator G, started from the mean latent. Two
phases: a small GAN is trained with the non-saturating logistic loss and an exponential moving
average of its generator is kept; then the averaged generator is frozen and a batch of held-out
targets is inverted. With rosinality/stylegan2-pytorch (https://github.com/rosinality/
stylegan2-pytorch, train.py train: d_logistic_loss = softplus(-D(x)) + softplus(D(G(z))) for the
discriminator on fakes that carry no generator gradient (requires_grad(generator, False) during
the D step), g_nonsaturating_loss = softplus(-D(G(z))) for the generator, accumulate(g_ema,
generator) after every iteration, an EMA written on .data; projector.py: the latent_in started
at the mean latent, detached and cloned, with requires_grad set, Adam over [latent_in] (and the
noise maps) alone, the learning rate from get_lr's cosine ramp, latent_noise adding Gaussian noise
of decaying strength to the code fed to g_ema, then optimizer.zero_grad(), loss.backward(),
optimizer.step() on the reconstruction loss differentiated through g_ema). Here the D step
detaches G's fakes instead of toggling requires_grad, both optimizers are cleared once at the
top of each GAN iteration, the EMA is a torch.no_grad() lerp_, the code is z itself (no mapping
network, no noise maps, so no noise regulariser), the perceptual loss is replaced by the squared
error plus a small Gaussian prior penalty on z, and g_ema is frozen with requires_grad_(False).
The data: points of a curved two-dimensional sheet in R^8, made in the script.
Bug: the discriminator's fakes keep the generator's graph, fake = generator(z) without
.detach(), where train.py train makes them with requires_grad(generator, False), so that the D
step gives the generator no gradient; here d_loss.backward() also runs into the generator and
leaves there the gradient of softplus(D(G(z))), which pushes the fakes towards looking fake, and
as the generator's gradients are cleared only at the top of the iteration, the generator's step
adds it to the gradient of its own non-saturating loss: every generator update also works for
the discriminator, partly cancelling the generator's own objective, so the GAN trains to a
different generator and the codes inverted through its moving average differ."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--gan-steps", type=int, default=200)
parser.add_argument("--invert-steps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-targets", type=int, default=16)
parser.add_argument("--ema-decay", type=float, default=0.95)
parser.add_argument("--invert-lr", type=float, default=0.1)
parser.add_argument("--prior-weight", type=float, default=1e-3)
parser.add_argument("--noise", type=float, default=0.05, help="latent noise at the start")
parser.add_argument("--out", default=None, help="where to save the networks and the codes")
args = parser.parse_args()
torch.manual_seed(args.seed)

z_dim, x_dim, hidden = 4, 8, 64
mixing = torch.randn(3, x_dim)


def sample_data(n):
    u = torch.rand(n, 2) * 2 - 1
    sheet = torch.cat([u, (u.pow(2).sum(1, keepdim=True) - 0.5)], 1)
    return torch.tanh(sheet @ mixing) + 0.02 * torch.randn(n, x_dim)


generator = nn.Sequential(nn.Linear(z_dim, hidden), nn.LeakyReLU(0.2),
                          nn.Linear(hidden, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, x_dim))
discriminator = nn.Sequential(nn.Linear(x_dim, hidden), nn.LeakyReLU(0.2),
                              nn.Linear(hidden, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1))
g_ema = copy.deepcopy(generator)
g_optimizer = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))

# phase 1: the GAN
for step in range(args.gan_steps):
    g_optimizer.zero_grad()
    d_optimizer.zero_grad()
    # discriminator step, on fakes that carry no generator gradient
    real = sample_data(args.batch_size)
    fake = generator(torch.randn(args.batch_size, z_dim))
    d_loss = F.softplus(-discriminator(real)).mean() + F.softplus(discriminator(fake)).mean()
    d_loss.backward()
    d_optimizer.step()
    # generator step, non-saturating
    fake = generator(torch.randn(args.batch_size, z_dim))
    g_loss = F.softplus(-discriminator(fake)).mean()
    g_loss.backward()
    g_optimizer.step()
    with torch.no_grad():
        for p_ema, p in zip(g_ema.parameters(), generator.parameters()):
            p_ema.lerp_(p, 1 - args.ema_decay)
    if step % 50 == 0:
        print(f"gan step {step} d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f}")

# phase 2: invert held-out targets through the frozen averaged generator
g_ema.eval()
g_ema.requires_grad_(False)
targets = sample_data(args.n_targets)
latent = torch.zeros(args.n_targets, z_dim, requires_grad=True)
z_optimizer = torch.optim.Adam([latent], lr=args.invert_lr)
for step in range(args.invert_steps):
    t = step / args.invert_steps
    ramp = 0.5 - 0.5 * math.cos(min(1.0, (1 - t) / 0.25) * math.pi)
    z_optimizer.param_groups[0]["lr"] = args.invert_lr * ramp * min(1.0, (t + 0.01) / 0.05)
    strength = args.noise * max(0.0, 1 - t / 0.75) ** 2
    latent_n = latent + strength * torch.randn_like(latent)
    recon = g_ema(latent_n)
    mse = F.mse_loss(recon, targets)
    loss = mse + args.prior_weight * latent.pow(2).sum(1).mean()
    z_optimizer.zero_grad()
    loss.backward()
    z_optimizer.step()
    if step % 25 == 0:
        print(f"invert step {step} mse {mse.item():.4f}")

if args.out:
    torch.save({"generator": generator.state_dict(), "g_ema": g_ema.state_dict(),
                "discriminator": discriminator.state_dict(), "latent": latent.detach()}, args.out)
