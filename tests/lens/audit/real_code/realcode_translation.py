"""GAN training steps from public code whose discriminators are handled between the losses:
CycleGAN (discriminators frozen by ``requires_grad`` for the generators' loss, fakes read back
from an image pool) and WGAN with weight clipping (the critic clamped through ``.data``).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, ``requires_grad`` flags, order of calls, detach()es) is the repository's.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn

# --- junyanz/pytorch-CycleGAN-and-pix2pix models/cycle_gan_model.py, models/networks.py,
# util/image_pool.py@032e88438b1b2690e538c2cf399ebceb76adbea9 ---------------------------------
# Correct (the official CycleGAN): forward(); D_A and D_B frozen by set_requires_grad for the G
# step; the G step (identity, GAN and cycle losses) through the frozen D's; the D's unfrozen;
# backward_D_A and backward_D_B read the fakes from an ImagePool (which stores image.data) and
# still call netD(fake.detach()). optimizer_G = Adam(chain(G_A, G_B)), optimizer_D =
# Adam(chain(D_A, D_B)); loss_D_A and loss_D_B are two backward() calls before one
# optimizer_D.step(). junyanz confirms it in #388 and #916 ("When updating D, we don't need to
# compute gradients for G. That's why we used detach") and #332 (the D's weights frozen during
# the G loss). A ResnetGenerator with 1 block, a PatchGAN with 2 layers, instance norm, lsgan,
# 16x16 images, pool_size 4 (50 in the repository) so that the second step already draws from
# the pool.


def set_requires_grad(nets: nn.Module | list[nn.Module], requires_grad: bool = False) -> None:
    """BaseModel.set_requires_grad."""
    if not isinstance(nets, list):
        nets = [nets]
    for net in nets:
        if net is not None:
            for param in net.parameters():
                param.requires_grad = requires_grad


class CGResnetBlock(nn.Module):
    def __init__(self, dim: int, norm_layer: Callable[[int], nn.Module], use_dropout: bool,
                 use_bias: bool) -> None:
        super().__init__()
        conv_block = [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, padding=0, bias=use_bias),
                      norm_layer(dim), nn.ReLU(True)]
        if use_dropout:
            conv_block += [nn.Dropout(0.5)]
        conv_block += [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, padding=0, bias=use_bias),
                       norm_layer(dim)]
        self.conv_block = nn.Sequential(*conv_block)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv_block(x)


class CGResnetGenerator(nn.Module):
    def __init__(self, input_nc: int, output_nc: int, ngf: int = 4, n_blocks: int = 1) -> None:
        super().__init__()
        norm_layer = functools.partial(nn.InstanceNorm2d, affine=False,
                                       track_running_stats=False)
        use_bias = True  # norm_layer.func == nn.InstanceNorm2d
        model = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, 7, padding=0, bias=use_bias),
                 norm_layer(ngf), nn.ReLU(True)]
        n_downsampling = 2
        for i in range(n_downsampling):
            mult = 2 ** i
            model += [nn.Conv2d(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1,
                                bias=use_bias), norm_layer(ngf * mult * 2), nn.ReLU(True)]
        mult = 2 ** n_downsampling
        for _ in range(n_blocks):
            model += [CGResnetBlock(ngf * mult, norm_layer, False, use_bias)]
        for i in range(n_downsampling):
            mult = 2 ** (n_downsampling - i)
            model += [nn.ConvTranspose2d(ngf * mult, int(ngf * mult / 2), 3, stride=2, padding=1,
                                         output_padding=1, bias=use_bias),
                      norm_layer(int(ngf * mult / 2)), nn.ReLU(True)]
        model += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, 7, padding=0), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.model(input)


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc: int, ndf: int = 4, n_layers: int = 2) -> None:
        super().__init__()
        norm_layer = functools.partial(nn.InstanceNorm2d, affine=False,
                                       track_running_stats=False)
        use_bias = True
        kw, padw = 4, 1
        sequence = [nn.Conv2d(input_nc, ndf, kw, stride=2, padding=padw), nn.LeakyReLU(0.2, True)]
        nf_mult = 1
        for n in range(1, n_layers):
            nf_mult_prev, nf_mult = nf_mult, min(2 ** n, 8)
            sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kw, stride=2, padding=padw,
                                   bias=use_bias), norm_layer(ndf * nf_mult),
                         nn.LeakyReLU(0.2, True)]
        nf_mult_prev, nf_mult = nf_mult, min(2 ** n_layers, 8)
        sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, kw, stride=1, padding=padw,
                               bias=use_bias), norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
        sequence += [nn.Conv2d(ndf * nf_mult, 1, kw, stride=1, padding=padw)]
        self.model = nn.Sequential(*sequence)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.model(input)


class GANLoss(nn.Module):
    def __init__(self, gan_mode: str = "lsgan", target_real_label: float = 1.0,
                 target_fake_label: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("real_label", torch.tensor(target_real_label))
        self.register_buffer("fake_label", torch.tensor(target_fake_label))
        self.loss = nn.MSELoss() if gan_mode == "lsgan" else nn.BCEWithLogitsLoss()

    def get_target_tensor(self, prediction: torch.Tensor, target_is_real: bool) -> torch.Tensor:
        target_tensor = self.real_label if target_is_real else self.fake_label
        return target_tensor.expand_as(prediction)

    def __call__(self, prediction: torch.Tensor, target_is_real: bool) -> torch.Tensor:
        return self.loss(prediction, self.get_target_tensor(prediction, target_is_real))


class ImagePool:
    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size
        if self.pool_size > 0:
            self.num_imgs = 0
            self.images: list[torch.Tensor] = []

    def query(self, images: torch.Tensor) -> torch.Tensor:
        if self.pool_size == 0:
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs = self.num_imgs + 1
                self.images.append(image)
                return_images.append(image)
            else:
                p = random.uniform(0, 1)
                if p > 0.5:
                    random_id = random.randint(0, self.pool_size - 1)
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:
                    return_images.append(image)
        return torch.cat(return_images, 0)


def cyclegan(seed: int, *, batch: int = 2, size: int = 16) -> RealCase:
    torch.manual_seed(seed)
    random.seed(seed)
    netG_A, netG_B = CGResnetGenerator(3, 3), CGResnetGenerator(3, 3)
    netD_A, netD_B = NLayerDiscriminator(3), NLayerDiscriminator(3)
    fake_A_pool, fake_B_pool = ImagePool(4), ImagePool(4)
    criterionGAN = GANLoss("lsgan")
    criterionCycle, criterionIdt = nn.L1Loss(), nn.L1Loss()
    optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()),
                                   lr=2e-4, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()),
                                   lr=2e-4, betas=(0.5, 0.999))
    lambda_idt, lambda_A, lambda_B = 0.5, 10.0, 10.0
    real_A = torch.rand(batch, 3, size, size) * 2 - 1
    real_B = torch.rand(batch, 3, size, size) * 2 - 1

    def backward_D_basic(netD: nn.Module, real: torch.Tensor, fake: torch.Tensor
                         ) -> torch.Tensor:
        pred_real = netD(real)
        loss_D_real = criterionGAN(pred_real, True)
        pred_fake = netD(fake.detach())
        loss_D_fake = criterionGAN(pred_fake, False)
        return (loss_D_real + loss_D_fake) * 0.5  # loss_D.backward() in the repository

    def step() -> dict[str, torch.Tensor]:
        # forward()
        fake_B = netG_A(real_A)
        rec_A = netG_B(fake_B)
        fake_A = netG_B(real_B)
        rec_B = netG_A(fake_A)
        # G_A and G_B
        set_requires_grad([netD_A, netD_B], False)
        idt_A = netG_A(real_B)
        loss_idt_A = criterionIdt(idt_A, real_B) * lambda_B * lambda_idt
        idt_B = netG_B(real_A)
        loss_idt_B = criterionIdt(idt_B, real_A) * lambda_A * lambda_idt
        loss_G_A = criterionGAN(netD_A(fake_B), True)
        loss_G_B = criterionGAN(netD_B(fake_A), True)
        loss_cycle_A = criterionCycle(rec_A, real_A) * lambda_A
        loss_cycle_B = criterionCycle(rec_B, real_B) * lambda_B
        loss_G = loss_G_A + loss_G_B + loss_cycle_A + loss_cycle_B + loss_idt_A + loss_idt_B
        # D_A and D_B
        set_requires_grad([netD_A, netD_B], True)
        loss_D_A = backward_D_basic(netD_A, real_B, fake_B_pool.query(fake_B))
        loss_D_B = backward_D_basic(netD_B, real_A, fake_A_pool.query(fake_A))
        return {"g": loss_G, "d_a": loss_D_A, "d_b": loss_D_B}

    return RealCase(
        "cyclegan", "junyanz/pytorch-CycleGAN-and-pix2pix models/cycle_gan_model.py@032e88438b1"
        "b2690e538c2cf399ebceb76adbea9",
        "https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/916 (+#388, #332)",
        "correct", step, {"g": optimizer_G, "d_a": optimizer_D, "d_b": optimizer_D},
        {"netG_A": netG_A, "netG_B": netG_B, "netD_A": netD_A, "netD_B": netD_B},
        expect_pass_through=False)


# --- eriklindernoren/PyTorch-GAN implementations/wgan/wgan.py@36d3c77e5ff20ebe0aeefd322326a134a27
# 9b93e (the file last changed in c5d6be17) -----------------------------------------------------
# Correct: WGAN with weight clipping. D reads generator(z).detach(); after optimizer_D.step()
# "for p in discriminator.parameters(): p.data.clamp_(-clip_value, clip_value)"; then (every
# n_critic iterations, the one taken here) the G step through the clipped, unfrozen D
# (pass-through). RMSprop for both. The maintainer put the .detach() in with 24387dd ("WGAN:
# Refined code structure", after #6 and #8 on this file); Arjovsky et al. 2017, Algorithm 1.
# BatchNorm1d(out, 0.8) (eps 0.8) as in the file.


def wgan_clip(seed: int, *, batch: int = 4, latent_dim: int = 6) -> RealCase:
    torch.manual_seed(seed)
    img_shape = (1, 4, 4)
    n_img = int(math.prod(img_shape))

    def block(in_feat: int, out_feat: int, normalize: bool = True) -> list[nn.Module]:
        layers: list[nn.Module] = [nn.Linear(in_feat, out_feat)]
        if normalize:
            layers.append(nn.BatchNorm1d(out_feat, 0.8))
        layers.append(nn.LeakyReLU(0.2, inplace=True))
        return layers

    class Generator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Sequential(*block(latent_dim, 8, normalize=False), *block(8, 16),
                                       nn.Linear(16, n_img), nn.Tanh())

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            img = self.model(z)
            return img.view(img.shape[0], *img_shape)

    class Discriminator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Sequential(nn.Linear(n_img, 8), nn.LeakyReLU(0.2, inplace=True),
                                       nn.Linear(8, 4), nn.LeakyReLU(0.2, inplace=True),
                                       nn.Linear(4, 1))

        def forward(self, img: torch.Tensor) -> torch.Tensor:
            return self.model(img.view(img.shape[0], -1))

    generator, discriminator = Generator(), Discriminator()
    optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=5e-5)
    optimizer_D = torch.optim.RMSprop(discriminator.parameters(), lr=5e-5)
    clip_value = 0.01
    real_imgs = torch.rand(batch, *img_shape) * 2 - 1

    def step() -> dict[str, torch.Tensor]:
        z = torch.randn(batch, latent_dim)
        fake_imgs = generator(z).detach()
        loss_D = -torch.mean(discriminator(real_imgs)) + torch.mean(discriminator(fake_imgs))
        # loss_D.backward(); optimizer_D.step() in the repository, then:
        for p in discriminator.parameters():
            p.data.clamp_(-clip_value, clip_value)
        # i % n_critic == 0: train the generator
        gen_imgs = generator(z)
        loss_G = -torch.mean(discriminator(gen_imgs))
        return {"d": loss_D, "g": loss_G}

    return RealCase(
        "wgan_clip", "eriklindernoren/PyTorch-GAN implementations/wgan/wgan.py@36d3c77e5ff20ebe0"
        "aeefd322326a134a279b93e", "https://arxiv.org/abs/1701.07875 (Algorithm 1); detach "
        "added in 24387ddc838a9eb4273c03bf19e3f35587e3f201", "correct", step,
        {"d": optimizer_D, "g": optimizer_G},
        {"generator": generator, "discriminator": discriminator}, expect_pass_through=True)


CASES: dict[str, Callable[[int], RealCase]] = {"cyclegan": cyclegan, "wgan_clip": wgan_clip}
