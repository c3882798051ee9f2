"""GAN steps from the Lightning ecosystem, written as plain steps (``{"g": g_loss, "d": d_loss}``
with ``{"g": opt_g, "d": opt_d}``): Lightning's own GAN template, whose D step reads
``self(z).detach()``, and lightning-bolts' basic GAN, whose D step reads ``self(z)`` as it is.

Under Lightning's automatic optimization ``toggle_optimizer`` freezes the generator's
parameters during the D step, so bolts' generator gets no gradient there; a plain step has no
such toggle, and the D loss reaches the generator. Each builder takes ``seed`` and returns a
:class:`RealCase`; the text is ours, the structure (modules, optimizers, order of calls, bug)
is the repository's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- Lightning-AI/pytorch-lightning examples/pytorch/domain_templates/generative_adversarial_net.py
# @215acdc3efa4b096c80ab2d0263cab20d2f06f54: manual optimization, the G step first (D reads
# self(z) with its graph: pass-through), then the D step on real images and on self(z).detach()
# (the generator run a second time on the same z). BCE with logits, Adam(lr, (b1, b2)).


class TemplateGenerator(nn.Module):
    def __init__(self, latent_dim: int = 4, img_shape: tuple[int, ...] = (1, 4, 4),
                 widths: tuple[int, ...] = (8, 12, 12, 16)) -> None:
        super().__init__()
        self.img_shape = img_shape

        def block(in_feat: int, out_feat: int, normalize: bool = True) -> list[nn.Module]:
            layers: list[nn.Module] = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(*block(latent_dim, widths[0], normalize=False),
                                   *block(widths[0], widths[1]), *block(widths[1], widths[2]),
                                   *block(widths[2], widths[3]),
                                   nn.Linear(widths[3], int(np.prod(img_shape))), nn.Tanh())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        img = self.model(z)
        return img.view(img.size(0), *self.img_shape)


class TemplateDiscriminator(nn.Module):
    def __init__(self, img_shape: tuple[int, ...] = (1, 4, 4), hidden: int = 8) -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Linear(int(np.prod(img_shape)), hidden),
                                   nn.LeakyReLU(0.2, inplace=True),
                                   nn.Linear(hidden, hidden // 2), nn.LeakyReLU(0.2, inplace=True),
                                   nn.Linear(hidden // 2, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.model(img.view(img.size(0), -1))


def lightning_gan(seed: int, *, batch: int = 4, latent_dim: int = 4) -> RealCase:
    torch.manual_seed(seed)
    generator, discriminator = TemplateGenerator(latent_dim), TemplateDiscriminator()
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    imgs = torch.rand(batch, 1, 4, 4) * 2 - 1

    def adversarial_loss(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(y_hat, y)

    def step() -> dict[str, torch.Tensor]:
        z = torch.randn(imgs.shape[0], latent_dim).type_as(imgs)
        valid = torch.ones(imgs.size(0), 1).type_as(imgs)
        g_loss = adversarial_loss(discriminator(generator(z)), valid)  # toggle_optimizer(opt_g)
        real_loss = adversarial_loss(discriminator(imgs), valid)  # toggle_optimizer(opt_d)
        fake = torch.zeros(imgs.size(0), 1).type_as(imgs)
        fake_loss = adversarial_loss(discriminator(generator(z).detach()), fake)
        d_loss = (real_loss + fake_loss) / 2
        return {"g": g_loss, "d": d_loss}

    return RealCase("lightning_gan", "Lightning-AI/pytorch-lightning examples/pytorch/domain_"
                    "templates/generative_adversarial_net.py@215acdc3efa4b096c80ab2d0263cab20d2"
                    "f06f54", "https://github.com/Lightning-AI/pytorch-lightning/pull/2019 (the "
                    "template's D step on self(z).detach(), kept since)", "correct", step,
                    {"g": opt_g, "d": opt_d},
                    {"generator": generator, "discriminator": discriminator},
                    expect_pass_through=True)


# --- Lightning-Universe/lightning-bolts src/pl_bolts/models/gans/basic/basic_gan_module.py,
# components.py@34958a8892d42714edf02ba896fd5861ebb3cb7e: automatic optimization with two
# optimizers (optimizer_idx 0: generator_step, 1: discriminator_step). discriminator_loss feeds
# x_fake = self(z) to the discriminator without detach ("gradient backprop & optimize ONLY D's
# parameters" relies on toggle_optimizer); the fixed twin detaches it as Lightning's template
# does. F.dropout(x, 0.3) in D is always on (training=True by default), D ends in a sigmoid.


class BoltsGenerator(nn.Module):
    def __init__(self, latent_dim: int = 4, img_shape: tuple[int, ...] = (1, 4, 4),
                 hidden_dim: int = 4) -> None:
        super().__init__()
        feats = int(np.prod(img_shape))
        self.img_shape = img_shape
        self.fc1 = nn.Linear(latent_dim, hidden_dim)
        self.fc2 = nn.Linear(self.fc1.out_features, self.fc1.out_features * 2)
        self.fc3 = nn.Linear(self.fc2.out_features, self.fc2.out_features * 2)
        self.fc4 = nn.Linear(self.fc3.out_features, feats)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = F.leaky_relu(self.fc1(z), 0.2)
        z = F.leaky_relu(self.fc2(z), 0.2)
        z = F.leaky_relu(self.fc3(z), 0.2)
        img = torch.tanh(self.fc4(z))
        return img.view(img.size(0), *self.img_shape)


class BoltsDiscriminator(nn.Module):
    def __init__(self, img_shape: tuple[int, ...] = (1, 4, 4), hidden_dim: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(int(np.prod(img_shape)), hidden_dim)
        self.fc2 = nn.Linear(self.fc1.out_features, self.fc1.out_features // 2)
        self.fc3 = nn.Linear(self.fc2.out_features, self.fc2.out_features // 2)
        self.fc4 = nn.Linear(self.fc3.out_features, 1)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = img.view(img.size(0), -1)
        x = F.dropout(F.leaky_relu(self.fc1(x), 0.2), 0.3)
        x = F.dropout(F.leaky_relu(self.fc2(x), 0.2), 0.3)
        x = F.dropout(F.leaky_relu(self.fc3(x), 0.2), 0.3)
        return torch.sigmoid(self.fc4(x))


def bolts_gan(seed: int, *, detach: bool = False, batch: int = 4, latent_dim: int = 4
              ) -> RealCase:
    torch.manual_seed(seed)
    generator, discriminator = BoltsGenerator(latent_dim), BoltsDiscriminator()
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
    x = torch.rand(batch, 1, 4, 4) * 2 - 1

    def generator_loss() -> torch.Tensor:
        z = torch.randn(x.shape[0], latent_dim)
        y = torch.ones(x.size(0), 1)
        generated_imgs = generator(z)
        return F.binary_cross_entropy(discriminator(generated_imgs), y)

    def discriminator_loss() -> torch.Tensor:
        b = x.size(0)
        real_loss = F.binary_cross_entropy(discriminator(x), torch.ones(b, 1))
        z = torch.randn(b, latent_dim)
        x_fake = generator(z)
        y_fake = torch.zeros(b, 1)
        if detach:
            fake_loss = F.binary_cross_entropy(discriminator(x_fake.detach()), y_fake)
        else:
            fake_loss = F.binary_cross_entropy(discriminator(x_fake), y_fake)  # audit: fix here
        return real_loss + fake_loss

    def step() -> dict[str, torch.Tensor]:
        return {"g": generator_loss(), "d": discriminator_loss()}

    return RealCase(f"bolts_gan{'_detached' if detach else ''}",
                    "Lightning-Universe/lightning-bolts src/pl_bolts/models/gans/basic/basic_gan_"
                    "module.py@34958a8892d42714edf02ba896fd5861ebb3cb7e",
                    "https://github.com/Lightning-AI/pytorch-lightning/issues/19310 (the D step "
                    "needs self(z).detach() unless toggle_optimizer freezes G)",
                    "correct" if detach else "leaks", step, {"g": opt_g, "d": opt_d},
                    {"generator": generator, "discriminator": discriminator},
                    expect_pass_through=True)


CASES: dict[str, Callable[[int], RealCase]] = {
    "lightning_gan": lightning_gan, "bolts_gan": bolts_gan,
    "bolts_gan_detached": lambda s: bolts_gan(s, detach=True),
}
