"""A VAE-GAN with three optimizers and gradient accumulation, at a tiny size, written after
Larsen, Sønderby, Larochelle and Winther, "Autoencoding beyond pixels using a learned similarity
metric" (ICML 2016, arXiv:1512.09300: the encoder trained on the prior term and the
reconstruction error measured in a hidden layer of the discriminator, the decoder on that error
weighted by ``gamma`` and on fooling the discriminator with reconstructions and with samples of
the prior, the discriminator on telling real data from both) and lucabergamini/VAEGAN-PYTORCH
(main.py: one RMSprop optimizer for each of the encoder, the decoder and the discriminator,
"so we can selectively backprop"). One forward pass a batch makes ``mu, logvar``, the sample
``z``, the reconstruction ``x_tilde = decoder(z)`` and the prior sample ``x_p``. The
discriminator's loss (on ``x_tilde.detach()`` and ``x_p.detach()``) comes first; it accumulates
over ``--accum-dis`` batches (2 at the defaults) and steps under ``if (i + 1) % accum_dis ==
0:``. Then, the discriminator's parameters set not to require grad, the encoder's and the
decoder's losses are backpropagated, each into its own network's parameters (``inputs=``),
through ``x_tilde``, made before the discriminator's step of that batch; the encoder and the
decoder accumulate over ``--accum-vae`` batches (4) and step together. ``zero_grad()`` follows
each step. 12 batches of 8-d vectors from a low-rank Gaussian made in the script. ``--out
PATH`` saves the three networks' state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--accum-dis", type=int, default=2)
parser.add_argument("--accum-vae", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--dim", type=int, default=8)
parser.add_argument("--z-dim", type=int, default=2)
parser.add_argument("--hidden", type=int, default=24)
parser.add_argument("--gamma", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

mixing = torch.randn(args.z_dim, args.dim)


def real_batch():
    return torch.tanh(torch.randn(args.batch_size, args.z_dim) @ mixing)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(args.dim, args.hidden), nn.ReLU())
        self.mu = nn.Linear(args.hidden, args.z_dim)
        self.logvar = nn.Linear(args.hidden, args.z_dim)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h), self.logvar(h)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(args.dim, args.hidden), nn.LeakyReLU(0.2))
        self.head = nn.Linear(args.hidden, 1)

    def forward(self, x):
        layer = self.features(x)
        return self.head(layer), layer


encoder = Encoder()
decoder = nn.Sequential(nn.Linear(args.z_dim, args.hidden), nn.ReLU(),
                        nn.Linear(args.hidden, args.dim), nn.Tanh())
discriminator = Discriminator()
optimizer_encoder = torch.optim.RMSprop(encoder.parameters(), lr=args.lr)
optimizer_decoder = torch.optim.RMSprop(decoder.parameters(), lr=args.lr)
optimizer_discriminator = torch.optim.RMSprop(discriminator.parameters(), lr=args.lr)


def bce(logits, value):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, value))


for i in range(args.iters):
    x = real_batch()
    mu, logvar = encoder(x)
    z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
    x_tilde = decoder(z)
    x_p = decoder(torch.randn(args.batch_size, args.z_dim))

    # the discriminator: real data against reconstructions and prior samples
    logits_x, _ = discriminator(x)
    logits_tilde, _ = discriminator(x_tilde.detach())
    logits_p, _ = discriminator(x_p.detach())
    loss_discriminator = bce(logits_x, 1.0) + bce(logits_tilde, 0.0) + bce(logits_p, 0.0)
    (loss_discriminator / args.accum_dis).backward()
    if (i + 1) % args.accum_dis == 0:
        optimizer_discriminator.step()
        optimizer_discriminator.zero_grad()

    # the encoder and the decoder, the discriminator held fixed
    for p in discriminator.parameters():
        p.requires_grad = False
    _, layer_x = discriminator(x)
    logits_tilde, layer_tilde = discriminator(x_tilde)
    logits_p, _ = discriminator(x_p)
    loss_llike = F.mse_loss(layer_tilde, layer_x)
    loss_prior = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), 1))
    loss_encoder = loss_prior + loss_llike
    loss_decoder = args.gamma * loss_llike + bce(logits_tilde, 1.0) + bce(logits_p, 1.0)
    (loss_encoder / args.accum_vae).backward(inputs=list(encoder.parameters()),
                                             retain_graph=True)
    (loss_decoder / args.accum_vae).backward(inputs=list(decoder.parameters()))
    for p in discriminator.parameters():
        p.requires_grad = True
    if (i + 1) % args.accum_vae == 0:
        optimizer_encoder.step()
        optimizer_decoder.step()
        optimizer_encoder.zero_grad()
        optimizer_decoder.zero_grad()
        print(f"[{i + 1}/{args.iters}] enc {loss_encoder.item():.4f} "
              f"dec {loss_decoder.item():.4f} dis {loss_discriminator.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
