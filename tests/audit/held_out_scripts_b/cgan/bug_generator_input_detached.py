"""A conditional GAN at a tiny size, written after Mirza and Osindero, "Conditional Generative
Adversarial Nets" (arXiv:1411.1784) and eriklindernoren/PyTorch-GAN
(https://github.com/eriklindernoren/PyTorch-GAN/blob/master/implementations/cgan/cgan.py): the
generator and the discriminator both read an embedding of the label, the least-squares adversarial
loss (``nn.MSELoss``), the generator's step first on ``discriminator(gen_imgs, gen_labels)``, then
the discriminator's on real samples and on ``gen_imgs.detach()``, Adam with betas (0.5, 0.999).
Data: one Gaussian in the plane per class, made in the script. Injected bug: the generator's step,
copied from the discriminator's, feeds ``gen_imgs.detach()`` to the discriminator, so the
generator gets no gradient."""

import argparse

import numpy as np
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--n-epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--latent-dim", type=int, default=8)
parser.add_argument("--n-classes", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
opt = parser.parse_args()
np.random.seed(opt.seed)
torch.manual_seed(opt.seed)

class_means = torch.tensor([[2.0, 0.0], [0.0, 2.0], [-2.0, 0.0], [0.0, -2.0]])
all_labels = torch.randint(0, opt.n_classes, (128,))
all_points = class_means[all_labels] + 0.2 * torch.randn(128, 2)
dataloader = list(zip(all_points.split(opt.batch_size), all_labels.split(opt.batch_size)))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.label_emb = nn.Embedding(opt.n_classes, opt.n_classes)
        self.model = nn.Sequential(nn.Linear(opt.latent_dim + opt.n_classes, 32),
                                   nn.LeakyReLU(0.2), nn.Linear(32, 2))

    def forward(self, noise, labels):
        return self.model(torch.cat((self.label_emb(labels), noise), -1))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.label_embedding = nn.Embedding(opt.n_classes, opt.n_classes)
        self.model = nn.Sequential(nn.Linear(2 + opt.n_classes, 32), nn.LeakyReLU(0.2),
                                   nn.Linear(32, 1))

    def forward(self, img, labels):
        return self.model(torch.cat((img, self.label_embedding(labels)), -1))


adversarial_loss = nn.MSELoss()
generator = Generator()
discriminator = Discriminator()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))

for epoch in range(opt.n_epochs):
    for imgs, labels in dataloader:
        batch_size = imgs.shape[0]
        valid = torch.ones(batch_size, 1)
        fake = torch.zeros(batch_size, 1)
        real_imgs, labels = imgs, labels

        optimizer_G.zero_grad()
        z = torch.as_tensor(np.random.normal(0, 1, (batch_size, opt.latent_dim)),
                            dtype=torch.float32)
        gen_labels = torch.as_tensor(np.random.randint(0, opt.n_classes, batch_size))
        gen_imgs = generator(z, gen_labels)
        validity = discriminator(gen_imgs.detach(), gen_labels)
        g_loss = adversarial_loss(validity, valid)
        g_loss.backward()
        optimizer_G.step()

        optimizer_D.zero_grad()
        validity_real = discriminator(real_imgs, labels)
        d_real_loss = adversarial_loss(validity_real, valid)
        validity_fake = discriminator(gen_imgs.detach(), gen_labels)
        d_fake_loss = adversarial_loss(validity_fake, fake)
        d_loss = (d_real_loss + d_fake_loss) / 2
        d_loss.backward()
        optimizer_D.step()
    print(f"epoch {epoch} D loss {d_loss.item():.4f} G loss {g_loss.item():.4f}")

if opt.out:
    torch.save({"generator": generator.state_dict(),
                "discriminator": discriminator.state_dict()}, opt.out)
