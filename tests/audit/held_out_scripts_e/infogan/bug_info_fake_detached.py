"""InfoGAN at a tiny size, written after Chen, Duan, Houthooft, Schulman, Sutskever and Abbeel,
"InfoGAN: Interpretable Representation Learning by Information Maximizing Generative Adversarial
Nets" (NIPS 2016, arXiv:1606.03657), with the training loop of eriklindernoren/PyTorch-GAN
(https://github.com/eriklindernoren/PyTorch-GAN, implementations/infogan/infogan.py): the generator
reads noise, a categorical code and continuous codes; the discriminator's body feeds an adversarial
head and the Q heads that recover the codes. Three Adam optimizers: the generator's, the
discriminator's, and an information optimizer over both networks. Each iteration takes a generator
step, a discriminator step on real samples and on the generated ones cut from the generator's graph
(.detach()), then an information step on freshly generated samples, whose loss (cross-entropy on the
categorical code, squared error on the continuous ones) trains the generator and the Q heads
together. MLPs on a mixture of Gaussians made in the script. Injected bug: the information step
reads the generated samples cut from the generator's graph (``gen_imgs.detach()``, copied from the
discriminator step), so the information loss trains the Q heads and the discriminator's body but no
longer the generator."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=14)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lambda-cat", type=float, default=1.0)
parser.add_argument("--lambda-con", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, latent_dim, n_classes, code_dim = 8, 6, 4, 2
modes = 2.0 * torch.randn(n_classes, dim)


def real_batch(n):
    return modes[torch.randint(0, n_classes, (n,))] + 0.3 * torch.randn(n, dim)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent_dim + n_classes + code_dim, 32), nn.ReLU(),
                                 nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, dim))

    def forward(self, noise, labels, code):
        return self.net(torch.cat([noise, labels, code], -1))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32),
                                  nn.LeakyReLU(0.2))
        self.adv_layer = nn.Linear(32, 1)
        self.aux_layer = nn.Linear(32, n_classes)
        self.latent_layer = nn.Linear(32, code_dim)

    def forward(self, x):
        h = self.body(x)
        return self.adv_layer(h), self.aux_layer(h), self.latent_layer(h)


def sample_inputs(n):
    z = torch.randn(n, latent_dim)
    labels = torch.randint(0, n_classes, (n,))
    code = 2 * torch.rand(n, code_dim) - 1
    return z, labels, F.one_hot(labels, n_classes).float(), code


generator, discriminator = Generator(), Discriminator()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.999))
optimizer_info = torch.optim.Adam([*generator.parameters(), *discriminator.parameters()],
                                  lr=1e-3, betas=(0.5, 0.999))
for step in range(args.steps):
    real = real_batch(args.batch_size)
    valid = torch.ones(args.batch_size, 1)
    fake = torch.zeros(args.batch_size, 1)

    # generator
    optimizer_G.zero_grad()
    z, _, label_input, code_input = sample_inputs(args.batch_size)
    gen_imgs = generator(z, label_input, code_input)
    validity, _, _ = discriminator(gen_imgs)
    g_loss = F.mse_loss(validity, valid)
    g_loss.backward()
    optimizer_G.step()

    # discriminator
    optimizer_D.zero_grad()
    real_pred, _, _ = discriminator(real)
    fake_pred, _, _ = discriminator(gen_imgs.detach())
    d_loss = (F.mse_loss(real_pred, valid) + F.mse_loss(fake_pred, fake)) / 2
    d_loss.backward()
    optimizer_D.step()

    # information loss
    optimizer_info.zero_grad()
    z, gt_labels, label_input, code_input = sample_inputs(args.batch_size)
    gen_imgs = generator(z, label_input, code_input)
    _, pred_label, pred_code = discriminator(gen_imgs.detach())
    info_loss = (args.lambda_cat * F.cross_entropy(pred_label, gt_labels)
                 + args.lambda_con * F.mse_loss(pred_code, code_input))
    info_loss.backward()
    optimizer_info.step()
    print(f"step {step} d {d_loss.item():.4f} g {g_loss.item():.4f} info {info_loss.item():.4f}")

if args.out:
    torch.save({"generator": generator.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
