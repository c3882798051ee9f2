"""U-GAT-IT's training step from public code: its discriminator loss reads the generators'
fakes without ``detach()`` (a leak into the generators, reported in the repository), and the
twin with the detach that report proposes.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, spectral norms, ``.data`` writes, order of calls, bug) is the
repository's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F
from torch.nn.parameter import Parameter

# --- znxlwm/UGATIT-pytorch UGATIT.py@14e07fa79217c9d48f5b9b3999a1dc03c5f7af78 (the training loop),
# networks.py@1ed59f2d026d6760408e9f423e093ca30f119b8e -------------------------------------------
# The D update feeds fake_A2B and fake_B2A to the four discriminators without detach(), so
# Discriminator_loss.backward() runs into genA2B and genB2A, outside D_optim (truth "leaks");
# the G update then runs through the unfrozen D's (pass-through, as in DCGAN). Reported in
# znxlwm/UGATIT-pytorch#66 ("why don't we use detach to stop gradient from G, as similar to ...
# pix2pix and cyclegan"). Harmless for training, since G_optim.zero_grad() comes before the G
# backward, but it is the leak the CycleGAN/pix2pix maintainers cut (junyanz #916). The
# RhoClipper (rho.data = clamp) that follows the G step opens the next step here. The twin
# "ugatit_detached" is the fix proposed in #66 (the D step on fake.detach()), truth correct.
# The light generator (ngf 2, 1 block), a global D with 5 layers, a local D with 4, 32x32
# images, batch 2.


class UResnetBlock(nn.Module):
    def __init__(self, dim: int, use_bias: bool) -> None:
        super().__init__()
        conv_block = [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, 1, 0, bias=use_bias),
                      nn.InstanceNorm2d(dim), nn.ReLU(True),
                      nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, 1, 0, bias=use_bias),
                      nn.InstanceNorm2d(dim)]
        self.conv_block = nn.Sequential(*conv_block)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv_block(x)


def _iln_stats(input: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    in_mean = torch.mean(torch.mean(input, dim=2, keepdim=True), dim=3, keepdim=True)
    in_var = torch.var(torch.var(input, dim=2, keepdim=True), dim=3, keepdim=True)
    out_in = (input - in_mean) / torch.sqrt(in_var + eps)
    ln_mean = torch.mean(torch.mean(torch.mean(input, dim=1, keepdim=True), dim=2, keepdim=True),
                         dim=3, keepdim=True)
    ln_var = torch.var(torch.var(torch.var(input, dim=1, keepdim=True), dim=2, keepdim=True),
                       dim=3, keepdim=True)
    out_ln = (input - ln_mean) / torch.sqrt(ln_var + eps)
    return out_in, out_ln


class adaILN(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.rho = Parameter(torch.Tensor(1, num_features, 1, 1))
        self.rho.data.fill_(0.9)

    def forward(self, input: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor
                ) -> torch.Tensor:
        out_in, out_ln = _iln_stats(input, self.eps)
        rho = self.rho.expand(input.shape[0], -1, -1, -1)
        out = rho * out_in + (1 - rho) * out_ln
        return out * gamma.unsqueeze(2).unsqueeze(3) + beta.unsqueeze(2).unsqueeze(3)


class ILN(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.rho = Parameter(torch.Tensor(1, num_features, 1, 1))
        self.gamma = Parameter(torch.Tensor(1, num_features, 1, 1))
        self.beta = Parameter(torch.Tensor(1, num_features, 1, 1))
        self.rho.data.fill_(0.0)
        self.gamma.data.fill_(1.0)
        self.beta.data.fill_(0.0)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        out_in, out_ln = _iln_stats(input, self.eps)
        n = input.shape[0]
        rho = self.rho.expand(n, -1, -1, -1)
        out = rho * out_in + (1 - rho) * out_ln
        return out * self.gamma.expand(n, -1, -1, -1) + self.beta.expand(n, -1, -1, -1)


class ResnetAdaILNBlock(nn.Module):
    def __init__(self, dim: int, use_bias: bool) -> None:
        super().__init__()
        self.pad1, self.conv1 = nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, 1, 0, bias=use_bias)
        self.norm1, self.relu1 = adaILN(dim), nn.ReLU(True)
        self.pad2, self.conv2 = nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, 1, 0, bias=use_bias)
        self.norm2 = adaILN(dim)

    def forward(self, x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor
                ) -> torch.Tensor:
        out = self.relu1(self.norm1(self.conv1(self.pad1(x)), gamma, beta))
        out = self.norm2(self.conv2(self.pad2(out)), gamma, beta)
        return out + x


def class_activation(x: torch.Tensor, gap_fc: nn.Module, gmp_fc: nn.Module
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """The CAM block that UGATIT's generator and discriminator both run: the logits of the
    average- and max-pooled features, and the features weighted by each fc's first parameter
    (``weight_orig`` under the spectral-norm hook), concatenated."""
    gap_logit = gap_fc(F.adaptive_avg_pool2d(x, 1).view(x.shape[0], -1))
    gap = x * next(iter(gap_fc.parameters())).unsqueeze(2).unsqueeze(3)
    gmp_logit = gmp_fc(F.adaptive_max_pool2d(x, 1).view(x.shape[0], -1))
    gmp = x * next(iter(gmp_fc.parameters())).unsqueeze(2).unsqueeze(3)
    cam_logit = torch.cat([gap_logit, gmp_logit], 1)
    return torch.cat([gap, gmp], 1), cam_logit


class UResnetGenerator(nn.Module):
    """UGATIT's ResnetGenerator, light=True."""

    def __init__(self, input_nc: int = 3, output_nc: int = 3, ngf: int = 2,
                 n_blocks: int = 1) -> None:
        super().__init__()
        self.n_blocks = n_blocks
        down = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, 7, 1, 0, bias=False),
                nn.InstanceNorm2d(ngf), nn.ReLU(True)]
        n_downsampling = 2
        for i in range(n_downsampling):
            mult = 2 ** i
            down += [nn.ReflectionPad2d(1),
                     nn.Conv2d(ngf * mult, ngf * mult * 2, 3, 2, 0, bias=False),
                     nn.InstanceNorm2d(ngf * mult * 2), nn.ReLU(True)]
        mult = 2 ** n_downsampling
        for _ in range(n_blocks):
            down += [UResnetBlock(ngf * mult, use_bias=False)]
        self.gap_fc = nn.Linear(ngf * mult, 1, bias=False)
        self.gmp_fc = nn.Linear(ngf * mult, 1, bias=False)
        self.conv1x1 = nn.Conv2d(ngf * mult * 2, ngf * mult, 1, 1, bias=True)
        self.relu = nn.ReLU(True)
        self.FC = nn.Sequential(nn.Linear(ngf * mult, ngf * mult, bias=False), nn.ReLU(True),
                                nn.Linear(ngf * mult, ngf * mult, bias=False), nn.ReLU(True))
        self.gamma = nn.Linear(ngf * mult, ngf * mult, bias=False)
        self.beta = nn.Linear(ngf * mult, ngf * mult, bias=False)
        for i in range(n_blocks):
            setattr(self, "UpBlock1_" + str(i + 1), ResnetAdaILNBlock(ngf * mult, use_bias=False))
        up = []
        for i in range(n_downsampling):
            mult = 2 ** (n_downsampling - i)
            up += [nn.Upsample(scale_factor=2, mode="nearest"), nn.ReflectionPad2d(1),
                   nn.Conv2d(ngf * mult, int(ngf * mult / 2), 3, 1, 0, bias=False),
                   ILN(int(ngf * mult / 2)), nn.ReLU(True)]
        up += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, 7, 1, 0, bias=False), nn.Tanh()]
        self.DownBlock, self.UpBlock2 = nn.Sequential(*down), nn.Sequential(*up)

    def forward(self, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.DownBlock(input)
        x, cam_logit = class_activation(x, self.gap_fc, self.gmp_fc)
        x = self.relu(self.conv1x1(x))
        heatmap = torch.sum(x, dim=1, keepdim=True)
        x_ = F.adaptive_avg_pool2d(x, 1)
        x_ = self.FC(x_.view(x_.shape[0], -1))
        gamma, beta = self.gamma(x_), self.beta(x_)
        for i in range(self.n_blocks):
            x = getattr(self, "UpBlock1_" + str(i + 1))(x, gamma, beta)
        return self.UpBlock2(x), cam_logit, heatmap


class UDiscriminator(nn.Module):
    def __init__(self, input_nc: int = 3, ndf: int = 2, n_layers: int = 5) -> None:
        super().__init__()
        sn = nn.utils.spectral_norm
        model = [nn.ReflectionPad2d(1), sn(nn.Conv2d(input_nc, ndf, 4, 2, 0, bias=True)),
                 nn.LeakyReLU(0.2, True)]
        for i in range(1, n_layers - 2):
            mult = 2 ** (i - 1)
            model += [nn.ReflectionPad2d(1),
                      sn(nn.Conv2d(ndf * mult, ndf * mult * 2, 4, 2, 0, bias=True)),
                      nn.LeakyReLU(0.2, True)]
        mult = 2 ** (n_layers - 2 - 1)
        model += [nn.ReflectionPad2d(1),
                  sn(nn.Conv2d(ndf * mult, ndf * mult * 2, 4, 1, 0, bias=True)),
                  nn.LeakyReLU(0.2, True)]
        mult = 2 ** (n_layers - 2)
        self.gap_fc = sn(nn.Linear(ndf * mult, 1, bias=False))
        self.gmp_fc = sn(nn.Linear(ndf * mult, 1, bias=False))
        self.conv1x1 = nn.Conv2d(ndf * mult * 2, ndf * mult, 1, 1, bias=True)
        self.leaky_relu = nn.LeakyReLU(0.2, True)
        self.pad = nn.ReflectionPad2d(1)
        self.conv = sn(nn.Conv2d(ndf * mult, 1, 4, 1, 0, bias=False))
        self.model = nn.Sequential(*model)

    def forward(self, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.model(input)
        x, cam_logit = class_activation(x, self.gap_fc, self.gmp_fc)
        x = self.leaky_relu(self.conv1x1(x))
        heatmap = torch.sum(x, dim=1, keepdim=True)
        out = self.conv(self.pad(x))
        return out, cam_logit, heatmap


class RhoClipper:
    def __init__(self, min: float, max: float) -> None:
        self.clip_min, self.clip_max = min, max

    def __call__(self, module: nn.Module) -> None:
        if hasattr(module, "rho"):
            w = module.rho.data
            w = w.clamp(self.clip_min, self.clip_max)
            module.rho.data = w


def ugatit(seed: int, *, detach: bool = False, batch: int = 2, size: int = 32) -> RealCase:
    torch.manual_seed(seed)
    genA2B, genB2A = UResnetGenerator(), UResnetGenerator()
    disGA, disGB = UDiscriminator(n_layers=5), UDiscriminator(n_layers=5)
    disLA, disLB = UDiscriminator(n_layers=4), UDiscriminator(n_layers=4)
    L1_loss, MSE_loss, BCE_loss = nn.L1Loss(), nn.MSELoss(), nn.BCEWithLogitsLoss()
    G_optim = torch.optim.Adam(itertools.chain(genA2B.parameters(), genB2A.parameters()),
                               lr=1e-4, betas=(0.5, 0.999), weight_decay=1e-4)
    D_optim = torch.optim.Adam(itertools.chain(disGA.parameters(), disGB.parameters(),
                                               disLA.parameters(), disLB.parameters()),
                               lr=1e-4, betas=(0.5, 0.999), weight_decay=1e-4)
    Rho_clipper = RhoClipper(0, 1)
    adv_weight, cycle_weight, identity_weight, cam_weight = 1, 10, 10, 1000
    real_A = torch.rand(batch, 3, size, size) * 2 - 1
    real_B = torch.rand(batch, 3, size, size) * 2 - 1
    for m in (genA2B, genB2A, disGA, disGB, disLA, disLB):
        m.train()

    def mse_to(x: torch.Tensor, value: float) -> torch.Tensor:
        return MSE_loss(x, torch.full_like(x, value))

    def step() -> dict[str, torch.Tensor]:
        # the previous iteration's RhoClipper, applied after G_optim.step()
        genA2B.apply(Rho_clipper)
        genB2A.apply(Rho_clipper)
        # Update D
        fake_A2B, _, _ = genA2B(real_A)
        fake_B2A, _, _ = genB2A(real_B)
        if detach:  # the fix #66 asks for (pix2pix / CycleGAN's fake.detach())
            fake_A2B, fake_B2A = fake_A2B.detach(), fake_B2A.detach()
        real_GA_logit, real_GA_cam_logit, _ = disGA(real_A)
        real_LA_logit, real_LA_cam_logit, _ = disLA(real_A)
        real_GB_logit, real_GB_cam_logit, _ = disGB(real_B)
        real_LB_logit, real_LB_cam_logit, _ = disLB(real_B)
        fake_GA_logit, fake_GA_cam_logit, _ = disGA(fake_B2A)  # audit: fix here
        fake_LA_logit, fake_LA_cam_logit, _ = disLA(fake_B2A)  # audit: fix here
        fake_GB_logit, fake_GB_cam_logit, _ = disGB(fake_A2B)  # audit: fix here
        fake_LB_logit, fake_LB_cam_logit, _ = disLB(fake_A2B)  # audit: fix here
        D_ad_loss_GA = mse_to(real_GA_logit, 1) + mse_to(fake_GA_logit, 0)
        D_ad_cam_loss_GA = mse_to(real_GA_cam_logit, 1) + mse_to(fake_GA_cam_logit, 0)
        D_ad_loss_LA = mse_to(real_LA_logit, 1) + mse_to(fake_LA_logit, 0)
        D_ad_cam_loss_LA = mse_to(real_LA_cam_logit, 1) + mse_to(fake_LA_cam_logit, 0)
        D_ad_loss_GB = mse_to(real_GB_logit, 1) + mse_to(fake_GB_logit, 0)
        D_ad_cam_loss_GB = mse_to(real_GB_cam_logit, 1) + mse_to(fake_GB_cam_logit, 0)
        D_ad_loss_LB = mse_to(real_LB_logit, 1) + mse_to(fake_LB_logit, 0)
        D_ad_cam_loss_LB = mse_to(real_LB_cam_logit, 1) + mse_to(fake_LB_cam_logit, 0)
        D_loss_A = adv_weight * (D_ad_loss_GA + D_ad_cam_loss_GA + D_ad_loss_LA + D_ad_cam_loss_LA)
        D_loss_B = adv_weight * (D_ad_loss_GB + D_ad_cam_loss_GB + D_ad_loss_LB + D_ad_cam_loss_LB)
        Discriminator_loss = D_loss_A + D_loss_B
        # Update G
        fake_A2B, fake_A2B_cam_logit, _ = genA2B(real_A)
        fake_B2A, fake_B2A_cam_logit, _ = genB2A(real_B)
        fake_A2B2A, _, _ = genB2A(fake_A2B)
        fake_B2A2B, _, _ = genA2B(fake_B2A)
        fake_A2A, fake_A2A_cam_logit, _ = genB2A(real_A)
        fake_B2B, fake_B2B_cam_logit, _ = genA2B(real_B)
        fake_GA_logit, fake_GA_cam_logit, _ = disGA(fake_B2A)
        fake_LA_logit, fake_LA_cam_logit, _ = disLA(fake_B2A)
        fake_GB_logit, fake_GB_cam_logit, _ = disGB(fake_A2B)
        fake_LB_logit, fake_LB_cam_logit, _ = disLB(fake_A2B)
        G_ad_loss_GA = mse_to(fake_GA_logit, 1)
        G_ad_cam_loss_GA = mse_to(fake_GA_cam_logit, 1)
        G_ad_loss_LA = mse_to(fake_LA_logit, 1)
        G_ad_cam_loss_LA = mse_to(fake_LA_cam_logit, 1)
        G_ad_loss_GB = mse_to(fake_GB_logit, 1)
        G_ad_cam_loss_GB = mse_to(fake_GB_cam_logit, 1)
        G_ad_loss_LB = mse_to(fake_LB_logit, 1)
        G_ad_cam_loss_LB = mse_to(fake_LB_cam_logit, 1)
        G_recon_loss_A = L1_loss(fake_A2B2A, real_A)
        G_recon_loss_B = L1_loss(fake_B2A2B, real_B)
        G_identity_loss_A = L1_loss(fake_A2A, real_A)
        G_identity_loss_B = L1_loss(fake_B2B, real_B)
        G_cam_loss_A = (BCE_loss(fake_B2A_cam_logit, torch.ones_like(fake_B2A_cam_logit))
                        + BCE_loss(fake_A2A_cam_logit, torch.zeros_like(fake_A2A_cam_logit)))
        G_cam_loss_B = (BCE_loss(fake_A2B_cam_logit, torch.ones_like(fake_A2B_cam_logit))
                        + BCE_loss(fake_B2B_cam_logit, torch.zeros_like(fake_B2B_cam_logit)))
        G_loss_A = (adv_weight * (G_ad_loss_GA + G_ad_cam_loss_GA + G_ad_loss_LA + G_ad_cam_loss_LA)
                    + cycle_weight * G_recon_loss_A + identity_weight * G_identity_loss_A
                    + cam_weight * G_cam_loss_A)
        G_loss_B = (adv_weight * (G_ad_loss_GB + G_ad_cam_loss_GB + G_ad_loss_LB + G_ad_cam_loss_LB)
                    + cycle_weight * G_recon_loss_B + identity_weight * G_identity_loss_B
                    + cam_weight * G_cam_loss_B)
        Generator_loss = G_loss_A + G_loss_B
        return {"d": Discriminator_loss, "g": Generator_loss}

    return RealCase(
        "ugatit_detached" if detach else "ugatit_no_detach",
        "znxlwm/UGATIT-pytorch UGATIT.py@14e07fa79217c9d48f5b9b3999a1dc03c5f7af78",
        "https://github.com/znxlwm/UGATIT-pytorch/issues/66", "correct" if detach else "leaks",
        step,
        {"d": D_optim, "g": G_optim},
        {"genA2B": genA2B, "genB2A": genB2A, "disGA": disGA, "disGB": disGB, "disLA": disLA,
         "disLB": disLB}, expect_pass_through=True)


CASES: dict[str, Callable[[int], RealCase]] = {
    "ugatit_no_detach": ugatit,
    "ugatit_detached": lambda s: ugatit(s, detach=True),
}
