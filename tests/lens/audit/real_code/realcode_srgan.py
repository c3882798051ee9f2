"""SRGAN from leftthomas/SRGAN at three points of its history: the D step on netG's output
without detach (until 2024), the first commit of leftthomas/SRGAN#148 (which detached the
output in the G step instead, so the G loss trained the discriminator), and the fix that
followed in the same pull request (the G step through netD, the D step on fake_img.detach()).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's, at tiny sizes (fewer residual
blocks and discriminator stages, a two-convolution frozen loss network for VGG16's features).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn

# --- leftthomas/SRGAN model.py, loss.py, train.py@ea9e982cb18d858be3237042a3ceb24e71966705 (before
# #148), @4dbef495eaa9d6106c58b127cd9714c0afba1070 (#148's first commit), @7ddfdf27273c42d858ec5
# 2cab5ca1cbfca81d0be (after #148). d_loss = 1 - D(x) + D(G(z)) on the means of a sigmoid D; the G
# loss is GeneratorLoss: MSE + 1e-3 adversarial (1 - D(G(z))) + 6e-3 perceptual (MSE between
# frozen VGG features) + 2e-8 total variation. Adam with default arguments for both.


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bn2(self.conv2(self.prelu(self.bn1(self.conv1(x)))))


class UpsampleBLock(nn.Module):
    def __init__(self, in_channels: int, up_scale: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, in_channels * up_scale ** 2, kernel_size=3, padding=1)
        self.pixel_shuffle = nn.PixelShuffle(up_scale)
        self.prelu = nn.PReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.prelu(self.pixel_shuffle(self.conv(x)))


class Generator(nn.Module):
    def __init__(self, scale_factor: int = 2, channels: int = 4, n_residual: int = 2) -> None:
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, channels, kernel_size=9, padding=4), nn.PReLU())
        self.residual = nn.Sequential(*[ResidualBlock(channels) for _ in range(n_residual)])
        self.block7 = nn.Sequential(nn.Conv2d(channels, channels, kernel_size=3, padding=1),
                                    nn.BatchNorm2d(channels))
        self.block8 = nn.Sequential(*[UpsampleBLock(channels, 2)
                                      for _ in range(int(math.log(scale_factor, 2)))],
                                    nn.Conv2d(channels, 3, kernel_size=9, padding=4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        block1 = self.block1(x)
        block7 = self.block7(self.residual(block1))
        return (torch.tanh(self.block8(block1 + block7)) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, c, kernel_size=3, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(c, c, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(c),
            nn.LeakyReLU(0.2),
            nn.Conv2d(c, 2 * c, kernel_size=3, padding=1), nn.BatchNorm2d(2 * c),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * c, 2 * c, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(2 * c),
            nn.LeakyReLU(0.2),
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(2 * c, 4 * c, kernel_size=1), nn.LeakyReLU(0.2),
            nn.Conv2d(4 * c, 1, kernel_size=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(x).view(x.size(0)))


class TVLoss(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, h_x, w_x = x.size(0), x.size(2), x.size(3)
        count_h = x[:, :, 1:, :].size(1) * x[:, :, 1:, :].size(2) * x[:, :, 1:, :].size(3)
        count_w = x[:, :, :, 1:].size(1) * x[:, :, :, 1:].size(2) * x[:, :, :, 1:].size(3)
        h_tv = torch.pow(x[:, :, 1:, :] - x[:, :, :h_x - 1, :], 2).sum()
        w_tv = torch.pow(x[:, :, :, 1:] - x[:, :, :, :w_x - 1], 2).sum()
        return 2 * (h_tv / count_h + w_tv / count_w) / batch_size


class GeneratorLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        loss_network = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True),
                                     nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(inplace=True)).eval()
        for param in loss_network.parameters():
            param.requires_grad = False
        self.loss_network = loss_network
        self.mse_loss, self.tv_loss = nn.MSELoss(), TVLoss()

    def forward(self, out_labels: torch.Tensor, out_images: torch.Tensor,
                target_images: torch.Tensor) -> torch.Tensor:
        adversarial_loss = torch.mean(1 - out_labels)
        perception_loss = self.mse_loss(self.loss_network(out_images),
                                        self.loss_network(target_images))
        image_loss = self.mse_loss(out_images, target_images)
        return (image_loss + 0.001 * adversarial_loss + 0.006 * perception_loss
                + 2e-8 * self.tv_loss(out_images))


def srgan(seed: int, *, version: str = "fixed", batch: int = 2) -> RealCase:
    torch.manual_seed(seed)
    netG, netD = Generator(), Discriminator()
    generator_criterion = GeneratorLoss()
    optimizerG = torch.optim.Adam(netG.parameters())
    optimizerD = torch.optim.Adam(netD.parameters())
    z, real_img = torch.rand(batch, 3, 8, 8), torch.rand(batch, 3, 16, 16)

    def step_before() -> dict[str, torch.Tensor]:
        # (1) Update D network: maximize D(x)-1-D(G(z))
        fake_img = netG(z)
        real_out = netD(real_img).mean()
        fake_out = netD(fake_img).mean()  # audit: fix here
        d_loss = 1 - real_out + fake_out
        # (2) Update G network (fake_img, fake_out computed again for Colab)
        fake_img = netG(z)
        fake_out = netD(fake_img).mean()
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        fake_img = netG(z)  # again, for the logged scores
        fake_out = netD(fake_img).mean()
        return {"d": d_loss, "g": g_loss}

    def step_first_commit() -> dict[str, torch.Tensor]:
        # (1) Update G network, with the adversarial term read from D(fake_img.detach())
        fake_img = netG(z)
        fake_out = netD(fake_img.detach()).mean()  # audit: fix here
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        # (2) Update D network, reusing the same fake_out
        real_out = netD(real_img).mean()
        d_loss = 1 - real_out + fake_out  # audit: fix here
        fake_img = netG(z)
        fake_out = netD(fake_img).mean()
        return {"g": g_loss, "d": d_loss}

    def step_fixed() -> dict[str, torch.Tensor]:
        fake_img = netG(z)
        fake_out = netD(fake_img).mean()
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        real_out = netD(real_img).mean()
        fake_out = netD(fake_img.detach()).mean()
        d_loss = 1 - real_out + fake_out
        fake_img = netG(z)
        fake_out = netD(fake_img).mean()
        return {"g": g_loss, "d": d_loss}

    step, commit, name = {
        "before": (step_before, "ea9e982cb18d858be3237042a3ceb24e71966705", "srgan_no_detach"),
        "first_commit": (step_first_commit, "4dbef495eaa9d6106c58b127cd9714c0afba1070",
                         "srgan_g_step_detach"),
        "fixed": (step_fixed, "7ddfdf27273c42d858ec52cab5ca1cbfca81d0be", "srgan"),
    }[version]
    return RealCase(name, f"leftthomas/SRGAN train.py@{commit}",
                    "https://github.com/leftthomas/SRGAN/pull/148",
                    "correct" if version == "fixed" else "leaks", step,
                    {"g": optimizerG, "d": optimizerD},
                    {"netG": netG, "netD": netD, "generator_criterion": generator_criterion},
                    expect_pass_through=True)


CASES: dict[str, Callable[[int], RealCase]] = {
    "srgan": srgan, "srgan_no_detach": lambda s: srgan(s, version="before"),
    "srgan_g_step_detach": lambda s: srgan(s, version="first_commit"),
}
