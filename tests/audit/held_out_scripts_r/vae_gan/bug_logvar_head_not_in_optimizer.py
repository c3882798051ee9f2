"""VAE/GAN at a tiny size, written after Larsen, Sønderby, Larochelle and Winther, "Autoencoding
beyond pixels using a learned similarity metric" (ICML 2016, arXiv:1512.09300), Algorithm 1: an
encoder, a decoder (the generator) and a discriminator, each with its own optimizer and its own
loss. The reconstruction error is measured in the discriminator's l-th layer, a Gaussian
log-likelihood of Dis_l(x) given Dis_l(Dec(z)), L_llike; the encoder minimises L_prior + L_llike,
the decoder gamma * L_llike - L_GAN, and the discriminator maximises L_GAN = log Dis(x) +
log(1 - Dis(Dec(z))) + log(1 - Dis(Dec(z_p))) with z_p drawn from the prior, all three gradients
taken at the same parameters before any of them moves. With andersbll/autoencoding_beyond_pixels
(https://github.com/andersbll/autoencoding_beyond_pixels, model/aegan.py AEGAN.setup: the
reconstruction error in the discriminator's recon_depth-th layer, the GAN decoding done by a second
decoder sharing the weights, decoder_neggrad, on a code passed through ScaleGradient(0.0) ("Kill
gradient from GAN loss to AE encoder"), together with samples of the prior; the discriminator's
recon layers weighted so that the reconstruction error does not train it; AEGAN.params and
GradientDescent.train_epoch: separate parameter groups for encoder, decoder and discriminator, each
stepped with its own learn-rule state after one forward and backward pass). Here the decoder's
whole loss, gamma times the feature reconstruction error plus its GAN term, is computed on a second
decoding of the code cut from the encoder, z.detach(), so that no decoder loss reaches the encoder;
the discriminator's loss sees the decoded samples detached; each optimizer's zero_grad() comes right
before its loss's backward, clearing what the earlier losses left in its network; and the three
steps come after the three backward passes, as in Algorithm 1. The reference's equilibrium gating
of the decoder and discriminator updates is left out. The data: points in [-1, 1]^16 made by a
fixed random network from three factors, made in the script.
Bug: the encoder's optimizer is built over the encoder's trunk and its mean head only,
encoder_params = [*encoder.parameters(), *mu_head.parameters()], leaving out the log-variance head
logvar_head, a separate module (the reference's AEGAN.params gathers the encoder's and the latent
encoder's parameters, mean and log-variance layers alike, into the encoder's group): the prior term
and the reconstruction error still fill logvar_head's gradients, but no optimizer steps them, so
the posterior variances stay at their random initialisation, the KL term cannot be brought down
through them and the codes keep a noise level the encoder cannot adapt."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.5, help="weight of L_llike for the decoder")
parser.add_argument("--out", default=None, help="where to save the three networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_dim, z_dim, n_factors, hidden = 16, 4, 3, 64

# data: three factors pushed through a fixed random network into [-1, 1]^16
n_data = 1024
factors = torch.rand(n_data, n_factors) * 2 - 1
mix1, mix2 = torch.randn(n_factors, 32), torch.randn(32, x_dim)
data = torch.tanh(2.0 * torch.tanh(factors @ mix1) @ mix2 / 32 ** 0.5)

encoder = nn.Sequential(nn.Linear(x_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
mu_head = nn.Linear(hidden, z_dim)
logvar_head = nn.Linear(hidden, z_dim)
decoder = nn.Sequential(nn.Linear(z_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                        nn.Linear(hidden, x_dim), nn.Tanh())


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(x_dim, hidden), nn.LeakyReLU(0.2),
                                      nn.Linear(hidden, hidden), nn.LeakyReLU(0.2))
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.features(x)).squeeze(1)


discriminator = Discriminator()

encoder_params = [*encoder.parameters(), *mu_head.parameters()]
enc_optimizer = torch.optim.RMSprop(encoder_params, lr=3e-4)
dec_optimizer = torch.optim.RMSprop(decoder.parameters(), lr=3e-4)
dis_optimizer = torch.optim.RMSprop(discriminator.parameters(), lr=3e-4)


def bce(logits, label):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, label))


for step in range(args.steps):
    x = data[torch.randint(0, n_data, (args.batch_size,))]

    # encoder's loss: the prior term and the reconstruction error in the discriminator's features
    h = encoder(x)
    mu, logvar = mu_head(h), logvar_head(h)
    z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
    x_tilde = decoder(z)
    feat_x = discriminator.features(x)
    llike = 0.5 * ((discriminator.features(x_tilde) - feat_x) ** 2).sum(1).mean()
    prior = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(1).mean()
    enc_loss = prior + llike

    # decoder's loss: the same codes, cut from the encoder, and codes drawn from the prior
    x_dec = decoder(z.detach())
    x_p = decoder(torch.randn(args.batch_size, z_dim))
    llike_dec = 0.5 * ((discriminator.features(x_dec) - feat_x) ** 2).sum(1).mean()
    gan_fake = bce(discriminator(x_dec), 0.0) + bce(discriminator(x_p), 0.0)
    dec_loss = args.gamma * llike_dec - gan_fake

    # discriminator's loss: data against the decoded samples, cut from the decoder
    dis_loss = (bce(discriminator(x), 1.0) + bce(discriminator(x_dec.detach()), 0.0)
                + bce(discriminator(x_p.detach()), 0.0))

    enc_optimizer.zero_grad()
    enc_loss.backward(retain_graph=True)
    dec_optimizer.zero_grad()
    dec_loss.backward()
    dis_optimizer.zero_grad()
    dis_loss.backward()
    enc_optimizer.step()
    dec_optimizer.step()
    dis_optimizer.step()

    if step % 25 == 0:
        print(f"step {step} prior {prior.item():.3f} llike {llike.item():.3f} "
              f"dis {dis_loss.item():.3f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "mu_head": mu_head.state_dict(),
                "logvar_head": logvar_head.state_dict(), "decoder": decoder.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
