"""Generative training steps from public code: the pytorch/examples VAE, and SynSin's custom
batch norm, whose running statistics are written with the batch mean's graph (with the twin
that writes them under ``no_grad``, as the repository's fix does).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, buffers and their in-place writes, order of calls, bug) is the
repository's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- pytorch/examples vae/main.py@77f55b912142e11fcfdf5b530231fb9c52f181e8 (the file last changed
# in fcce71c1f0ae34bef104aeea8e0e008ea58058a8) ----------------------------------------------------
# Correct (the official example): a VAE with the reparameterization, BCE(sum) + KLD,
# Adam(model.parameters(), 1e-3). Sizes 784 -> 16, 400 -> 8, 20 -> 3.


class VAE(nn.Module):
    def __init__(self, n_in: int = 16, n_hid: int = 8, n_z: int = 3) -> None:
        super().__init__()
        self.n_in = n_in
        self.fc1 = nn.Linear(n_in, n_hid)
        self.fc21 = nn.Linear(n_hid, n_z)
        self.fc22 = nn.Linear(n_hid, n_z)
        self.fc3 = nn.Linear(n_z, n_hid)
        self.fc4 = nn.Linear(n_hid, n_in)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encode(x.view(-1, self.n_in))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def vae(seed: int, *, batch: int = 4) -> RealCase:
    torch.manual_seed(seed)
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.rand(batch, 1, 4, 4)
    model.train()

    def loss_function(recon_x: torch.Tensor, x: torch.Tensor, mu: torch.Tensor,
                      logvar: torch.Tensor) -> torch.Tensor:
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, 16), reduction="sum")
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD

    def step() -> torch.Tensor:
        recon_batch, mu, logvar = model(data)
        return loss_function(recon_batch, data, mu, logvar)

    return RealCase("vae", "pytorch/examples vae/main.py@77f55b912142e11fcfdf5b530231fb9c52f181e8",
                    "https://arxiv.org/abs/1312.6114 (Kingma & Welling 2014; the official "
                    "pytorch/examples VAE)", "correct", step,
                    optimizer, {"model": model})


# --- facebookresearch/synsin models/layers/normalization.py, blocks.py, models/base_model.py
# @82ff948f91a779188c467922c8f5144018b40ac8 ("Committing SynSin code.") ------------------------
# The BigGAN-style bn inside LinearNoiseLayer (the ResNet_Block of the ResNetEncoder and
# ResNetDecoder) writes self.stored_mean[:] = stored_mean * (1 - momentum) + mean * momentum with
# the batch mean's graph: the buffers keep a grad_fn and the graph grows every step (truth
# "held"). da12397a012078482de8dd2196e5fb29c7eb8c8c wraps the update in torch.no_grad(): PR
# facebookresearch/synsin#20 ("Memory leak in custom batch-norm", confirmed by jcjohnson and the
# author), after pytorch/pytorch#20275; the fixed twin is correct. Without a discriminator:
# optimizer_G = Adam(model.parameters(), betas=(0.99, beta2)). One down block and one up block,
# the L1 reconstruction ("Total Loss"), 8x8 images.


def manual_bn(x: torch.Tensor, gain: torch.Tensor | None = None,
              bias: torch.Tensor | None = None, return_mean_var: bool = False,
              eps: float = 1e-5) -> Any:
    float_x = x.float()
    m = torch.mean(float_x, [0, 2, 3], keepdim=True)
    m2 = torch.mean(float_x ** 2, [0, 2, 3], keepdim=True)
    var = m2 - m ** 2
    var = var.type(x.type())
    m = m.type(x.type())
    if return_mean_var:
        return fused_bn(x, m, var, gain, bias, eps), m.squeeze(), var.squeeze()
    return fused_bn(x, m, var, gain, bias, eps)


def fused_bn(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
             gain: torch.Tensor | None = None, bias: torch.Tensor | None = None,
             eps: float = 1e-5) -> torch.Tensor:
    scale = torch.rsqrt(var + eps)
    if gain is not None:
        scale = scale * gain
    shift = mean * scale
    if bias is not None:
        shift = shift - bias
    return x * scale - shift


class SynBN(nn.Module):
    fixed = False

    def __init__(self, num_channels: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.register_buffer("stored_mean", torch.zeros(num_channels))
        self.register_buffer("stored_var", torch.ones(num_channels))
        self.register_buffer("accumulation_counter", torch.zeros(1))
        self.accumulate_standing = False

    def _update(self, mean: torch.Tensor, var: torch.Tensor) -> None:
        if self.accumulate_standing:
            self.stored_mean[:] = self.stored_mean + mean.data
            self.stored_var[:] = self.stored_var + var.data
            self.accumulation_counter += 1.0
        else:
            self.stored_mean[:] = (  # audit: fix here
                self.stored_mean * (1 - self.momentum) + mean * self.momentum)
            self.stored_var[:] = (  # audit: fix here
                self.stored_var * (1 - self.momentum) + var * self.momentum)

    def forward(self, x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor
                ) -> torch.Tensor:
        if self.training:
            out, mean, var = manual_bn(x, gain, bias, return_mean_var=True, eps=self.eps)
            if self.fixed:
                with torch.no_grad():
                    self._update(mean, var)
            else:
                self._update(mean, var)
            return out
        mean = self.stored_mean.view(1, -1, 1, 1)
        var = self.stored_var.view(1, -1, 1, 1)
        if self.accumulate_standing:
            mean = mean / self.accumulation_counter
            var = var / self.accumulation_counter
        return fused_bn(x, mean, var, gain, bias, self.eps)


class LinearNoiseLayer(nn.Module):
    def __init__(self, bn_cls: type[SynBN], noise_sz: int = 4, output_sz: int = 4) -> None:
        super().__init__()
        self.noise_sz = noise_sz
        self.gain = nn.Linear(noise_sz, output_sz, bias=False)
        self.bias = nn.Linear(noise_sz, output_sz, bias=False)
        self.bn = bn_cls(output_sz)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(x.size(0), self.noise_sz).to(x.device)
        gain = (1 + self.gain(noise)).view(noise.size(0), -1, 1, 1)
        bias = self.bias(noise).view(noise.size(0), -1, 1, 1)
        return self.bn(x, gain=gain, bias=bias)


class ResNet_Block(nn.Module):
    def __init__(self, in_c: int, in_o: int, bn_cls: type[SynBN],
                 downsample: str | None = None) -> None:
        super().__init__()
        bn_noise1 = LinearNoiseLayer(bn_cls, output_sz=in_c)
        bn_noise2 = LinearNoiseLayer(bn_cls, output_sz=in_o)
        conv_aa = nn.Conv2d(in_c, in_o, kernel_size=3, padding=1, stride=1)
        conv_ab = nn.Conv2d(in_o, in_o, kernel_size=3, padding=1, stride=1)
        conv_b = nn.Conv2d(in_c, in_o, kernel_size=1, padding=0, stride=1)
        if downsample == "Down":
            norm_downsample = nn.AvgPool2d(kernel_size=3, stride=2, padding=1)
        elif downsample == "Up":
            norm_downsample = nn.Upsample(scale_factor=2, mode="bilinear")
        else:
            norm_downsample = nn.Identity()
        self.ch_a = nn.Sequential(bn_noise1, nn.ReLU(), conv_aa, bn_noise2, nn.ReLU(), conv_ab,
                                  norm_downsample)
        if downsample or (in_c != in_o):
            self.ch_b = nn.Sequential(conv_b, norm_downsample)
        else:
            self.ch_b = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ch_a(x) + self.ch_b(x)


def synsin(seed: int, *, fixed: bool = False, batch: int = 2) -> RealCase:
    torch.manual_seed(seed)
    bn_cls = type("bn", (SynBN,), {"fixed": fixed})
    model = nn.Sequential(ResNet_Block(3, 4, bn_cls, "Down"), ResNet_Block(4, 3, bn_cls, "Up"))
    optimizer_G = torch.optim.Adam(list(model.parameters()), lr=1e-4, betas=(0.99, 0.999))
    img = torch.rand(batch, 3, 8, 8) * 2 - 1
    target = torch.rand(batch, 3, 8, 8) * 2 - 1
    model.train()

    def step() -> torch.Tensor:
        pred = model(img)
        t_losses = {"Total Loss": F.l1_loss(pred, target)}
        weight = 1.0
        return (t_losses["Total Loss"] / weight).mean()

    return RealCase(
        f"synsin_bn{'_fixed' if fixed else ''}",
        "facebookresearch/synsin models/layers/normalization.py@"
        + ("da12397a012078482de8dd2196e5fb29c7eb8c8c" if fixed
           else "82ff948f91a779188c467922c8f5144018b40ac8"),
        "https://github.com/facebookresearch/synsin/pull/20", "correct" if fixed else "held",
        step, optimizer_G, {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "vae": vae,
    "synsin_bn": synsin,
    "synsin_bn_fixed": lambda s: synsin(s, fixed=True),
}
