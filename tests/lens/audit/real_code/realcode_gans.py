"""GAN training steps from public code: DCGAN, DCGAN under the three weight-normalisation APIs,
a self-attention GAN with its own spectral norm, and WGAN-GP's gradient penalty.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- pytorch/examples dcgan/main.py @ 13caa078cd69d74ffb447a9eda09f0a81b809480 -------------------
# Correct: the discriminator step reads fake.detach(); the generator step backpropagates through
# netD (pass-through). The bug twin drops the detach in the D step: "why detach in the D step"
# is pytorch/examples#116 (the answer: without it backward runs into G for nothing).


def _dcgan_nets(nz: int = 4, ngf: int = 2, ndf: int = 2, nc: int = 1,
                norm: str = "none") -> tuple[nn.Module, nn.Module]:
    def up(i: int, o: int, first: bool = False) -> list[nn.Module]:
        return [nn.ConvTranspose2d(i, o, 4, 1 if first else 2, 0 if first else 1, bias=False),
                nn.BatchNorm2d(o), nn.ReLU(True)]

    netG = nn.Sequential(*up(nz, ngf * 8, True), *up(ngf * 8, ngf * 4), *up(ngf * 4, ngf * 2),
                         *up(ngf * 2, ngf), nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
                         nn.Tanh())
    convs = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
             nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
             nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
             nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False)]
    wrap = {"none": lambda m: m, "spectral_norm_hook": nn.utils.spectral_norm,
            "spectral_norm": nn.utils.parametrizations.spectral_norm,
            "weight_norm": nn.utils.parametrizations.weight_norm,
            "weight_norm_hook": nn.utils.weight_norm}[norm]
    convs = [wrap(c) for c in convs]
    netD = nn.Sequential(convs[0], nn.LeakyReLU(0.2, inplace=True),
                         convs[1], nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
                         convs[2], nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
                         convs[3], nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
                         convs[4], nn.Sigmoid())
    return netG, netD


def dcgan(seed: int, *, detach: bool = True, norm: str = "none", batch: int = 2) -> RealCase:
    torch.manual_seed(seed)
    nz = 4
    netG, netD = _dcgan_nets(nz=nz, norm=norm)
    criterion = nn.BCELoss()
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(batch, 1, 64, 64) * 2 - 1

    def step() -> dict[str, torch.Tensor]:
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        label = torch.full((batch,), 1.0)
        output = netD(real).view(-1)
        errD_real = criterion(output, label)
        noise = torch.randn(batch, nz, 1, 1)
        fake = netG(noise)
        fake_label = torch.full((batch,), 0.0)  # the original refills one label in place
        output = netD(fake.detach() if detach else fake).view(-1)  # audit: fix here
        errD_fake = criterion(output, fake_label)
        errD = errD_real + errD_fake
        # (2) update G: maximize log(D(G(z)))
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        return {"d": errD, "g": errG}

    name = "dcgan" + ("" if norm == "none" else f"_{norm}") + ("" if detach else "_no_detach")
    return RealCase(
        name, "pytorch/examples dcgan/main.py@13caa078cd69d74ffb447a9eda09f0a81b809480",
        "https://github.com/pytorch/examples/issues/116" if not detach else (
            "https://pytorch.org/docs/stable/generated/torch.nn.utils.parametrizations."
            "spectral_norm.html" if norm != "none" else
            "https://github.com/pytorch/examples/issues/116"),
        "correct" if detach else "leaks", step, {"d": optimizerD, "g": optimizerG},
        {"netG": netG, "netD": netD}, expect_pass_through=True)


# --- heykeetae/Self-Attention-GAN sagan_models.py@4bd217e3cd3415a8b148f9e279250be5c46743ad,
# spectral.py, trainer.py@e78f98c8d0b63356ea765ea83f4b61f054f0f204 -----------------------------
# Its own SpectralNorm wrapper keeps weight_bar (trained) and u, v (Parameters with
# requires_grad=False, outside the optimizers, which filter on requires_grad), and sets
# module.weight = weight_bar / sigma before each forward. The D step feeds G(z) to D without
# detach: heykeetae/Self-Attention-GAN#48. Hinge loss, Adam(0.0, 0.9), two attention blocks.


def _l2normalize(v: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    return v / (v.norm() + eps)


class SpectralNorm(nn.Module):
    """The repository's wrapper: weight recomputed from weight_bar by one power iteration."""

    def __init__(self, module: nn.Module, name: str = "weight") -> None:
        super().__init__()
        self.module, self.name = module, name
        w = getattr(module, name)
        height = w.data.shape[0]
        width = w.view(height, -1).data.shape[1]
        u = nn.Parameter(_l2normalize(w.data.new(height).normal_(0, 1)), requires_grad=False)
        v = nn.Parameter(_l2normalize(w.data.new(width).normal_(0, 1)), requires_grad=False)
        w_bar = nn.Parameter(w.data)
        del module._parameters[name]
        module.register_parameter(name + "_u", u)
        module.register_parameter(name + "_v", v)
        module.register_parameter(name + "_bar", w_bar)

    def _update_u_v(self) -> None:
        u = getattr(self.module, self.name + "_u")
        v = getattr(self.module, self.name + "_v")
        w = getattr(self.module, self.name + "_bar")
        height = w.data.shape[0]
        v.data = _l2normalize(torch.mv(torch.t(w.view(height, -1).data), u.data))
        u.data = _l2normalize(torch.mv(w.view(height, -1).data, v.data))
        sigma = u.dot(w.view(height, -1).mv(v))
        setattr(self.module, self.name, w / sigma.expand_as(w))

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        self._update_u_v()
        return self.module.forward(*args)


class SelfAttn(nn.Module):
    """Self-attention over positions, ``gamma`` scaling the attended values into the input."""

    def __init__(self, in_dim: int) -> None:
        super().__init__()
        self.query_conv = nn.Conv2d(in_dim, in_dim // 8, 1)
        self.key_conv = nn.Conv2d(in_dim, in_dim // 8, 1)
        self.value_conv = nn.Conv2d(in_dim, in_dim, 1)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, c, w, h = x.size()
        query = self.query_conv(x).view(b, -1, w * h).permute(0, 2, 1)
        key = self.key_conv(x).view(b, -1, w * h)
        attention = self.softmax(torch.bmm(query, key))
        value = self.value_conv(x).view(b, -1, w * h)
        out = torch.bmm(value, attention.permute(0, 2, 1)).view(b, c, w, h)
        return self.gamma * out + x, attention


class Generator(nn.Module):
    def __init__(self, z_dim: int = 8) -> None:
        super().__init__()
        self.l1 = nn.Sequential(SpectralNorm(nn.ConvTranspose2d(z_dim, 32, 4)),
                                nn.BatchNorm2d(32), nn.ReLU())
        self.l2 = nn.Sequential(SpectralNorm(nn.ConvTranspose2d(32, 16, 4, 2, 1)),
                                nn.BatchNorm2d(16), nn.ReLU())
        self.l3 = nn.Sequential(SpectralNorm(nn.ConvTranspose2d(16, 8, 4, 2, 1)),
                                nn.BatchNorm2d(8), nn.ReLU())
        self.last = nn.Sequential(nn.ConvTranspose2d(8, 3, 3, 1, 1), nn.Tanh())
        self.attn1, self.attn2 = SelfAttn(16), SelfAttn(8)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.l2(self.l1(z.view(z.size(0), z.size(1), 1, 1)))
        out, p1 = self.attn1(out)
        out, p2 = self.attn2(self.l3(out))
        return self.last(out), p1, p2


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Sequential(SpectralNorm(nn.Conv2d(3, 8, 4, 2, 1)), nn.LeakyReLU(0.1))
        self.l2 = nn.Sequential(SpectralNorm(nn.Conv2d(8, 16, 4, 2, 1)), nn.LeakyReLU(0.1))
        self.l3 = nn.Sequential(SpectralNorm(nn.Conv2d(16, 32, 4, 2, 1)), nn.LeakyReLU(0.1))
        self.last = nn.Sequential(nn.Conv2d(32, 1, 2))
        self.attn1, self.attn2 = SelfAttn(16), SelfAttn(32)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, p1 = self.attn1(self.l2(self.l1(x)))
        out, p2 = self.attn2(self.l3(out))
        return self.last(out).squeeze(), p1, p2


def sagan(seed: int, *, detach: bool = False, batch: int = 2) -> RealCase:
    torch.manual_seed(seed)
    G, D = Generator(), Discriminator()
    g_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, G.parameters()), 1e-4,
                                   [0.0, 0.9])
    d_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, D.parameters()), 4e-4,
                                   [0.0, 0.9])
    real_images = torch.rand(batch, 3, 16, 16) * 2 - 1

    def step() -> dict[str, torch.Tensor]:
        d_out_real, _dr1, _dr2 = D(real_images)
        d_loss_real = F.relu(1.0 - d_out_real).mean()
        z = torch.randn(batch, 8)
        fake_images, _gf1, _gf2 = G(z)
        d_out_fake, _df1, _df2 = D(  # audit: fix here
            fake_images.detach() if detach else fake_images)
        d_loss_fake = F.relu(1.0 + d_out_fake).mean()
        d_loss = d_loss_real + d_loss_fake
        z = torch.randn(batch, 8)
        fake_images, _, _ = G(z)
        g_out_fake, _, _ = D(fake_images)
        g_loss_fake = -g_out_fake.mean()
        return {"d": d_loss, "g": g_loss_fake}

    return RealCase(f"sagan{'_detached' if detach else ''}",
                    "heykeetae/Self-Attention-GAN trainer.py@e78f98c8d0b63356ea765ea83f4b61f05"
                    "4f0f204", "https://github.com/heykeetae/Self-Attention-GAN/issues/48",
                    "correct" if detach else "leaks", step, {"d": d_optimizer, "g": g_optimizer},
                    {"G": G, "D": D}, expect_pass_through=True)


# --- caogang/wgan-gp gan_toy.py@081b0f3d43117195481e21c2acae25dd8cf04773 -----------------------
# Correct: the critic's gradient penalty differentiates D at interpolates made to require grad
# (autograd.Variable(..., requires_grad=True) there, requires_grad_(True) here); D's parameters
# are frozen (requires_grad = False) for the generator step, as the script does.


def wgan_gp(seed: int, *, dim: int = 8, batch: int = 4, lam: float = 0.1) -> RealCase:
    torch.manual_seed(seed)
    netG = nn.Sequential(nn.Linear(2, dim), nn.ReLU(True), nn.Linear(dim, dim), nn.ReLU(True),
                         nn.Linear(dim, dim), nn.ReLU(True), nn.Linear(dim, 2))
    netD = nn.Sequential(nn.Linear(2, dim), nn.ReLU(True), nn.Linear(dim, dim), nn.ReLU(True),
                         nn.Linear(dim, dim), nn.ReLU(True), nn.Linear(dim, 1))
    optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-4, betas=(0.5, 0.9))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-4, betas=(0.5, 0.9))
    real_data = torch.randn(batch, 2)

    def calc_gradient_penalty(netD: nn.Module, real: torch.Tensor, fake: torch.Tensor
                              ) -> torch.Tensor:
        alpha = torch.rand(batch, 1).expand(real.size())
        interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        disc_interpolates = netD(interpolates)
        gradients = torch.autograd.grad(disc_interpolates, interpolates,
                                        torch.ones(disc_interpolates.size()),
                                        create_graph=True, retain_graph=True)[0]
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lam

    def step() -> dict[str, torch.Tensor]:
        for p in netD.parameters():
            p.requires_grad = True
        D_real = netD(real_data).mean()
        noise = torch.randn(batch, 2)
        fake = netG(noise).data
        D_fake = netD(fake).mean()
        gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
        D_cost = D_fake - D_real + gradient_penalty
        for p in netD.parameters():
            p.requires_grad = False
        G = netD(netG(torch.randn(batch, 2))).mean()
        for p in netD.parameters():  # the next iteration's first line, before D's backward
            p.requires_grad = True
        return {"d": D_cost, "g": -G}

    return RealCase("wgan_gp", "caogang/wgan-gp gan_toy.py@081b0f3d43117195481e21c2acae25dd8cf"
                    "04773", "https://arxiv.org/abs/1704.00028 (Gulrajani et al., Algorithm 1)",
                    "correct", step, {"d": optimizerD, "g": optimizerG},
                    {"netG": netG, "netD": netD})


CASES = {
    "dcgan": lambda s: dcgan(s), "dcgan_no_detach": lambda s: dcgan(s, detach=False),
    "dcgan_spectral_norm_hook": lambda s: dcgan(s, norm="spectral_norm_hook"),
    "dcgan_spectral_norm": lambda s: dcgan(s, norm="spectral_norm"),
    "dcgan_weight_norm": lambda s: dcgan(s, norm="weight_norm"),
    "dcgan_weight_norm_hook": lambda s: dcgan(s, norm="weight_norm_hook"),
    "sagan": lambda s: sagan(s), "sagan_detached": lambda s: sagan(s, detach=True),
    "wgan_gp": wgan_gp,
}
