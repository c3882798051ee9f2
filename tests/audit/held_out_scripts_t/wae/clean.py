"""Wasserstein Auto-Encoder, WAE-GAN variant, on tiny synthetic data, written after Tolstikhin,
Bousquet, Gelly and Schoelkopf, "Wasserstein Auto-Encoders" (ICLR 2018, arXiv:1711.01558),
Algorithm 2: a deterministic encoder Q(z|x) and a decoder G(z) are trained on the
reconstruction cost c(x, G(Q(x))) plus lambda times a penalty D_Z(Q_Z, P_Z) that pushes the
aggregate distribution of the codes towards the prior P_Z; in WAE-GAN the penalty is estimated
by an adversary in the latent space, a discriminator D that is trained to tell prior samples
(label 1) from encoded codes (label 0), while the encoder is trained with the non-saturating
term -log D(Q(x)). The adversary's step treats the codes as fixed inputs; only the autoencoder
step sends gradient into the encoder. With the authors' code, tolstikhin/wae
(https://github.com/tolstikhin/wae, wae.py class WAE: gan_penalty builds logits_Pz and logits_Qz
with z_adversary, loss_adversary = wae_lambda * (loss_Pz + loss_Qz) with sigmoid cross-entropy
and the non-saturating loss_match = loss_Qz_trick; reconstruction_loss with cost 'l2sq' is
0.05 * mean ||x - G(Q(x))||^2; add_optimizers makes ae_opt minimize wae_objective =
loss_reconstruct + wae_lambda * penalty over encoder_vars + decoder_vars only and z_adv_opt
minimize loss_adversary over the z_adversary variables only; pretrain_loss and pretrain_encoder
first fit the mean and covariance of the codes to those of the prior with an encoder-only
optimizer; train alternates, on the same batch and prior noise, one ae_opt and one z_adv_opt
update). The TensorFlow var_list of z_adv_opt is what keeps the encoder out of the adversary's
update; in PyTorch the codes are detached for the adversary's loss, as in the PyTorch port
schelotto/Wasserstein-AutoEncoders (wae_gan.py, which freezes the encoder and decoder with
frozen_params during the discriminator step, clears every network's gradient once at the top of
the iteration and updates the discriminator before the autoencoder). This script follows that
port's order (one zero_grad block per iteration, adversary first, then the autoencoder), the
authors' losses and optimizers, and the encoder pretraining as a first phase. The data are
8-dimensional points on a noisy 2-D curved sheet, the prior is N(0, I) in 2-D, and all three
networks are small MLPs.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=30)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--wae-lambda", type=float, default=1.0)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--lr-adv", type=float, default=5e-4)
parser.add_argument("--out", default=None, help="where to save the three networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_dim, z_dim, hidden = 8, 2, 32

# data: a noisy 2-D sheet, bent into 8 dimensions
n_points = 1024
t = torch.rand(n_points, 2) * 2 - 1
lift = torch.randn(4, x_dim)
features = torch.stack([t[:, 0], t[:, 1], t[:, 0] * t[:, 1], torch.sin(2 * t[:, 0])], 1)
data = features @ lift + 0.05 * torch.randn(n_points, x_dim)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_out))


encoder = mlp(x_dim, z_dim)
decoder = mlp(z_dim, x_dim)
discriminator = mlp(z_dim, 1)


def sample_pz(n):
    return torch.randn(n, z_dim)


def sample_batch():
    return data[torch.randint(0, n_points, (args.batch_size,))]


# phase 1: pretrain the encoder so that the codes' mean and covariance match the prior's
pretrain_optimizer = torch.optim.Adam(encoder.parameters(), lr=args.lr)
for step in range(args.pretrain_steps):
    x, noise = sample_batch(), sample_pz(args.batch_size)
    codes = encoder(x)
    mean_pz, mean_qz = noise.mean(0, keepdim=True), codes.mean(0, keepdim=True)
    cov_pz = (noise - mean_pz).T @ (noise - mean_pz) / (args.batch_size - 1)
    cov_qz = (codes - mean_qz).T @ (codes - mean_qz) / (args.batch_size - 1)
    pretrain_loss = (mean_pz - mean_qz).pow(2).mean() + (cov_pz - cov_qz).pow(2).mean()
    pretrain_optimizer.zero_grad()
    pretrain_loss.backward()
    pretrain_optimizer.step()
    if step % 20 == 0:
        print(f"pretrain {step} loss {pretrain_loss.item():.4f}")

# phase 2: WAE-GAN, the latent adversary and the autoencoder in turn
ae_optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()),
                                lr=args.lr, betas=(0.5, 0.999))
adv_optimizer = torch.optim.Adam(discriminator.parameters(), lr=args.lr_adv, betas=(0.5, 0.999))
for step in range(args.steps):
    x, noise = sample_batch(), sample_pz(args.batch_size)
    ae_optimizer.zero_grad()
    adv_optimizer.zero_grad()

    # the adversary: prior samples are "true" (1), encoded codes "fake" (0)
    z_qz = encoder(x).detach()
    logits_pz = discriminator(noise)
    logits_qz = discriminator(z_qz)
    loss_pz = F.binary_cross_entropy_with_logits(logits_pz, torch.ones_like(logits_pz))
    loss_qz = F.binary_cross_entropy_with_logits(logits_qz, torch.zeros_like(logits_qz))
    loss_adversary = args.wae_lambda * (loss_pz + loss_qz)
    loss_adversary.backward()
    adv_optimizer.step()

    # the autoencoder: reconstruction plus lambda times the non-saturating GAN penalty
    z_enc = encoder(x)
    recon = decoder(z_enc)
    loss_reconstruct = 0.05 * (x - recon).pow(2).sum(1).mean()
    logits_enc = discriminator(z_enc)
    penalty = F.binary_cross_entropy_with_logits(logits_enc, torch.ones_like(logits_enc))
    wae_objective = loss_reconstruct + args.wae_lambda * penalty
    wae_objective.backward()
    ae_optimizer.step()
    if step % 50 == 0:
        print(f"wae {step} recon {loss_reconstruct.item():.4f} penalty {penalty.item():.4f}"
              f" adversary {loss_adversary.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
