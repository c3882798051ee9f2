"""An autoencoder trained with a reconstruction loss and an adversarial loss weighted by the
adaptive weight of Esser, Rombach and Ommer, "Taming Transformers for High-Resolution Image
Synthesis" (CVPR 2021, arXiv:2012.09841), written after CompVis/taming-transformers
(taming/modules/losses/vqperceptual.py, ``calculate_adaptive_weight``): the gradients of the
reconstruction loss and of the generator's loss with respect to the decoder's last layer,
taken with ``torch.autograd.grad`` (first order, no graph), give the ratio of their norms,
clamped and detached, that weights the generator's loss. The discriminator is trained with the
hinge loss on real samples and on the reconstructions detached. The autoencoder has its own
Adam, the discriminator its own; the codebook of the VQGAN is left out (a plain autoencoder).
Data: 8-D vectors on a 2-D subspace with noise, made in the script. As published: clean; the
first-order gradients only weight a loss that has its graph. ``--out PATH`` saves the
autoencoder's and the discriminator's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--disc-weight", type=float, default=0.8)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

basis = torch.randn(2, 8)
data = torch.randn(256, 2) @ basis + 0.05 * torch.randn(256, 8)

encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
decoder = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 8))
discriminator = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_ae = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=2e-3,
                          betas=(0.5, 0.9))
opt_disc = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.9))


def calculate_adaptive_weight(nll_loss, g_loss, last_layer):
    nll_grads = torch.autograd.grad(nll_loss, last_layer, retain_graph=True)[0]
    g_grads = torch.autograd.grad(g_loss, last_layer, retain_graph=True)[0]
    d_weight = torch.norm(nll_grads) / (torch.norm(g_grads) + 1e-4)
    d_weight = torch.clamp(d_weight, 0.0, 1e4).detach()
    d_weight = d_weight * args.disc_weight
    return d_weight


def hinge_d_loss(logits_real, logits_fake):
    loss_real = torch.mean(F.relu(1.0 - logits_real))
    loss_fake = torch.mean(F.relu(1.0 + logits_fake))
    return 0.5 * (loss_real + loss_fake)


for it in range(args.iterations):
    inputs = data[torch.randint(0, len(data), (args.batch_size,))]
    reconstructions = decoder(encoder(inputs))

    nll_loss = torch.abs(inputs - reconstructions).mean()
    logits_fake = discriminator(reconstructions)
    g_loss = -torch.mean(logits_fake)
    d_weight = calculate_adaptive_weight(nll_loss, g_loss, last_layer=decoder[-1].weight)
    loss = nll_loss + d_weight * g_loss
    opt_ae.zero_grad()
    loss.backward()
    opt_ae.step()

    logits_real = discriminator(inputs.detach())
    logits_fake = discriminator(reconstructions.detach())
    d_loss = hinge_d_loss(logits_real, logits_fake)
    opt_disc.zero_grad()
    d_loss.backward()
    opt_disc.step()
    print(f"iteration {it} nll {nll_loss.item():.4f} d_weight {d_weight.item():.4f} "
          f"g_loss {g_loss.item():.4f} d_loss {d_loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
