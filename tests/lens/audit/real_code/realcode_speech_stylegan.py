"""Speech recognition and StyleGAN2 training steps from public code: StyleGAN2's four-phase
iteration (logistic losses, lazy R1 on real images, path-length regularization with its running
mean), a Listen-Attend-Spell model whose attention keeps the encoder's keys and values between
decoding steps, and DeepSpeech2's CTC step over a convolutional and bidirectional-LSTM acoustic
model.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's, at tiny sizes.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable

import numpy as np
import torch
from realcode_common import RealCase
from torch import autograd, nn
from torch.nn import functional as F

# --- rosinality/stylegan2-pytorch train.py, model.py@bef283a1c24087da704d16c30abc8e36e63efa0e:
# one iteration of train(): the discriminator's logistic loss on G(z) made with G frozen
# (requires_grad(generator, False)), then its lazy R1 penalty d_r1_loss (autograd.grad of D(real)
# w.r.t. the real images with create_graph=True, plus 0 * real_pred[0]), then the generator's
# non-saturating loss through a frozen D, then g_path_regularize: the Jacobian-vector product
# of the image with noise randn_like(fake) / sqrt(H * W) w.r.t. the W+ latents, the running
# mean path length (a Python 0 at first) moved by decay and returned .detach()ed for the next
# call. Each phase has its own backward and step (Adam, lr and betas scaled by the lazy
# intervals; both lazy intervals are 1 here, so every call runs all four). Commit
# 7550be431b7c1dc9982bbe3a336d2a2f4aec9f6e ("Fixed gradient penalty grads") moved the detach
# from path_lengths.detach().mean() to the returned mean: within the call the penalty keeps the
# gradient through the new mean, as NVlabs/stylegan2 training/loss.py (G_logistic_ns_pathreg:
# pl_mean = pl_mean_var + pl_decay * (reduce_mean(pl_lengths) - pl_mean_var)) does, and only
# the stored value is cut (stylegan2-ada-pytorch: pl_mean.copy_(pl_mean.detach())): correct.
# stylegan2_mean_path_graph: the mean returned with its graph, read by the next call's penalty.
# The custom CUDA ops (upfirdn2d, fused leaky ReLU, conv2d_gradfix) are written with plain torch
# ops here: the same numbers (no_weight_gradients only skips weight gradients R1 never asks for).


def _make_kernel(k: list[float]) -> torch.Tensor:
    t = torch.tensor(k, dtype=torch.float32)
    t = t[None, :] * t[:, None]
    return t / t.sum()


def _upfirdn2d(x: torch.Tensor, kernel: torch.Tensor, up: int = 1, down: int = 1,
               pad: tuple[int, int] = (0, 0)) -> torch.Tensor:
    """Upsample by zeros, pad, correlate with the flipped kernel, keep every ``down``-th pixel."""
    b, c, h, w = x.shape
    if up > 1:
        x = F.pad(x.view(b, c, h, 1, w, 1), [0, up - 1, 0, 0, 0, up - 1]).view(
            b, c, h * up, w * up)
    x = F.pad(x, [pad[0], pad[1], pad[0], pad[1]])
    weight = torch.flip(kernel, [0, 1]).expand(c, 1, *kernel.shape)
    return F.conv2d(x, weight, groups=c)[:, :, ::down, ::down]


def _fused_leaky_relu(x: torch.Tensor, bias: torch.Tensor, scale: float = 2 ** 0.5
                      ) -> torch.Tensor:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return F.leaky_relu(x + bias.view(shape), 0.2) * scale


class FusedLeakyReLU(nn.Module):
    def __init__(self, channel: int, bias: bool = True) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channel)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bias is None:
            return F.leaky_relu(x, 0.2) * 2 ** 0.5
        return _fused_leaky_relu(x, self.bias)


class PixelNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-8)


class Blur(nn.Module):
    def __init__(self, kernel: list[float], pad: tuple[int, int], upsample_factor: int = 1
                 ) -> None:
        super().__init__()
        k = _make_kernel(kernel)
        if upsample_factor > 1:
            k = k * upsample_factor ** 2
        self.register_buffer("kernel", k)
        self.pad = pad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _upfirdn2d(x, self.kernel, pad=self.pad)


class Upsample(nn.Module):
    def __init__(self, kernel: list[float], factor: int = 2) -> None:
        super().__init__()
        self.factor = factor
        self.register_buffer("kernel", _make_kernel(kernel) * factor ** 2)
        p = self.kernel.shape[0] - factor
        self.pad = ((p + 1) // 2 + factor - 1, p // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _upfirdn2d(x, self.kernel, up=self.factor, pad=self.pad)


class EqualConv2d(nn.Module):
    def __init__(self, in_channel: int, out_channel: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, bias: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channel, in_channel, kernel_size,
                                               kernel_size))
        self.scale = 1 / math.sqrt(in_channel * kernel_size ** 2)
        self.stride, self.padding = stride, padding
        self.bias = nn.Parameter(torch.zeros(out_channel)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight * self.scale, bias=self.bias, stride=self.stride,
                        padding=self.padding)


class EqualLinear(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, bias: bool = True, bias_init: float = 0.0,
                 lr_mul: float = 1.0, activation: str | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
        self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init)) if bias else None
        self.activation = activation
        self.scale = (1 / math.sqrt(in_dim)) * lr_mul
        self.lr_mul = lr_mul

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation:
            return _fused_leaky_relu(F.linear(x, self.weight * self.scale),
                                     self.bias * self.lr_mul)
        return F.linear(x, self.weight * self.scale, bias=self.bias * self.lr_mul)


class ModulatedConv2d(nn.Module):
    """The fused path: per-sample weights modulated by the style, demodulated, one grouped
    convolution over the batch (transposed and blurred when upsampling)."""

    def __init__(self, in_channel: int, out_channel: int, kernel_size: int, style_dim: int,
                 demodulate: bool = True, upsample: bool = False,
                 blur_kernel: tuple[float, ...] = (1, 3, 3, 1)) -> None:
        super().__init__()
        self.kernel_size, self.in_channel, self.out_channel = kernel_size, in_channel, out_channel
        self.upsample = upsample
        if upsample:
            factor = 2
            p = (len(blur_kernel) - factor) - (kernel_size - 1)
            self.blur = Blur(list(blur_kernel), pad=((p + 1) // 2 + factor - 1, p // 2 + 1),
                             upsample_factor=factor)
        self.scale = 1 / math.sqrt(in_channel * kernel_size ** 2)
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.randn(1, out_channel, in_channel, kernel_size,
                                               kernel_size))
        self.modulation = EqualLinear(style_dim, in_channel, bias_init=1)
        self.demodulate = demodulate

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        batch, in_channel, height, width = x.shape
        style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
        weight = self.scale * self.weight * style
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
        weight = weight.view(batch * self.out_channel, in_channel, self.kernel_size,
                             self.kernel_size)
        x = x.view(1, batch * in_channel, height, width)
        if self.upsample:
            weight = weight.view(batch, self.out_channel, in_channel, self.kernel_size,
                                 self.kernel_size)
            weight = weight.transpose(1, 2).reshape(batch * in_channel, self.out_channel,
                                                    self.kernel_size, self.kernel_size)
            out = F.conv_transpose2d(x, weight, padding=0, stride=2, groups=batch)
            _, _, height, width = out.shape
            return self.blur(out.view(batch, self.out_channel, height, width))
        out = F.conv2d(x, weight, padding=self.padding, groups=batch)
        _, _, height, width = out.shape
        return out.view(batch, self.out_channel, height, width)


class NoiseInjection(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, image: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        if noise is None:
            batch, _, height, width = image.shape
            noise = image.new_empty(batch, 1, height, width).normal_()
        return image + self.weight * noise


class ConstantInput(nn.Module):
    def __init__(self, channel: int, size: int = 4) -> None:
        super().__init__()
        self.input = nn.Parameter(torch.randn(1, channel, size, size))

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.input.repeat(latent.shape[0], 1, 1, 1)


class StyledConv(nn.Module):
    def __init__(self, in_channel: int, out_channel: int, kernel_size: int, style_dim: int,
                 upsample: bool = False) -> None:
        super().__init__()
        self.conv = ModulatedConv2d(in_channel, out_channel, kernel_size, style_dim,
                                    upsample=upsample)
        self.noise = NoiseInjection()
        self.activate = FusedLeakyReLU(out_channel)

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        return self.activate(self.noise(self.conv(x, style)))


class ToRGB(nn.Module):
    def __init__(self, in_channel: int, style_dim: int, upsample: bool = True) -> None:
        super().__init__()
        if upsample:
            self.upsample = Upsample([1, 3, 3, 1])
        self.conv = ModulatedConv2d(in_channel, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None = None
                ) -> torch.Tensor:
        out = self.conv(x, style) + self.bias
        if skip is not None:
            out = out + self.upsample(skip)
        return out


class Generator(nn.Module):
    """Mapping network (PixelNorm, EqualLinear with lr_mul 0.01), a constant 4x4 input, styled
    convolutions with noise, skip ToRGB outputs; style mixing at a random layer."""

    def __init__(self, size: int, style_dim: int, n_mlp: int, channel: int,
                 rng: random.Random, lr_mlp: float = 0.01) -> None:
        super().__init__()
        self.style_dim, self.rng = style_dim, rng
        self.style = nn.Sequential(PixelNorm(), *(
            EqualLinear(style_dim, style_dim, lr_mul=lr_mlp, activation="fused_lrelu")
            for _ in range(n_mlp)))
        self.input = ConstantInput(channel)
        self.conv1 = StyledConv(channel, channel, 3, style_dim)
        self.to_rgb1 = ToRGB(channel, style_dim, upsample=False)
        self.log_size = int(math.log(size, 2))
        self.convs, self.to_rgbs = nn.ModuleList(), nn.ModuleList()
        for _ in range(3, self.log_size + 1):
            self.convs.append(StyledConv(channel, channel, 3, style_dim, upsample=True))
            self.convs.append(StyledConv(channel, channel, 3, style_dim))
            self.to_rgbs.append(ToRGB(channel, style_dim))
        self.n_latent = self.log_size * 2 - 2

    def forward(self, styles: list[torch.Tensor], return_latents: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        styles = [self.style(s) for s in styles]
        if len(styles) < 2:
            latent = styles[0].unsqueeze(1).repeat(1, self.n_latent, 1)
        else:
            inject_index = self.rng.randint(1, self.n_latent - 1)
            latent = torch.cat([styles[0].unsqueeze(1).repeat(1, inject_index, 1),
                                styles[1].unsqueeze(1).repeat(1, self.n_latent - inject_index,
                                                              1)], 1)
        out = self.conv1(self.input(latent), latent[:, 0])
        skip = self.to_rgb1(out, latent[:, 1])
        i = 1
        for conv1, conv2, to_rgb in zip(self.convs[::2], self.convs[1::2], self.to_rgbs):
            out = conv2(conv1(out, latent[:, i]), latent[:, i + 1])
            skip = to_rgb(out, latent[:, i + 2], skip)
            i += 2
        return skip, (latent if return_latents else None)


class ConvLayer(nn.Sequential):
    def __init__(self, in_channel: int, out_channel: int, kernel_size: int,
                 downsample: bool = False, bias: bool = True, activate: bool = True) -> None:
        layers: list[nn.Module] = []
        if downsample:
            p = (4 - 2) + (kernel_size - 1)
            layers.append(Blur([1, 3, 3, 1], pad=((p + 1) // 2, p // 2)))
            stride, padding = 2, 0
        else:
            stride, padding = 1, kernel_size // 2
        layers.append(EqualConv2d(in_channel, out_channel, kernel_size, padding=padding,
                                  stride=stride, bias=bias and not activate))
        if activate:
            layers.append(FusedLeakyReLU(out_channel, bias=bias))
        super().__init__(*layers)


class ResBlock(nn.Module):
    def __init__(self, in_channel: int, out_channel: int) -> None:
        super().__init__()
        self.conv1 = ConvLayer(in_channel, in_channel, 3)
        self.conv2 = ConvLayer(in_channel, out_channel, 3, downsample=True)
        self.skip = ConvLayer(in_channel, out_channel, 1, downsample=True, activate=False,
                              bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.conv2(self.conv1(x)) + self.skip(x)) / math.sqrt(2)


class Discriminator(nn.Module):
    """ResNet discriminator with the minibatch standard-deviation feature."""

    def __init__(self, size: int, channel: int) -> None:
        super().__init__()
        convs: list[nn.Module] = [ConvLayer(3, channel, 1)]
        for _ in range(int(math.log(size, 2)), 2, -1):
            convs.append(ResBlock(channel, channel))
        self.convs = nn.Sequential(*convs)
        self.stddev_group, self.stddev_feat = 4, 1
        self.final_conv = ConvLayer(channel + 1, channel, 3)
        self.final_linear = nn.Sequential(
            EqualLinear(channel * 4 * 4, channel, activation="fused_lrelu"),
            EqualLinear(channel, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.convs(x)
        batch, channel, height, width = out.shape
        group = min(batch, self.stddev_group)
        stddev = out.view(group, -1, self.stddev_feat, channel // self.stddev_feat, height,
                          width)
        stddev = torch.sqrt(stddev.var(0, unbiased=False) + 1e-8)
        stddev = stddev.mean([2, 3, 4], keepdim=True).squeeze(2)
        stddev = stddev.repeat(group, 1, height, width)
        out = self.final_conv(torch.cat([out, stddev], 1))
        return self.final_linear(out.view(batch, -1))


def _requires_grad(model: nn.Module, flag: bool = True) -> None:
    for p in model.parameters():
        p.requires_grad = flag


def _accumulate(model1: nn.Module, model2: nn.Module, decay: float = 0.999) -> None:
    par1, par2 = dict(model1.named_parameters()), dict(model2.named_parameters())
    for k in par1:
        par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)


def d_logistic_loss(real_pred: torch.Tensor, fake_pred: torch.Tensor) -> torch.Tensor:
    return F.softplus(-real_pred).mean() + F.softplus(fake_pred).mean()


def d_r1_loss(real_pred: torch.Tensor, real_img: torch.Tensor) -> torch.Tensor:
    (grad_real,) = autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
    return grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()


def g_nonsaturating_loss(fake_pred: torch.Tensor) -> torch.Tensor:
    return F.softplus(-fake_pred).mean()


def g_path_regularize(fake_img: torch.Tensor, latents: torch.Tensor,
                      mean_path_length: float | torch.Tensor, decay: float = 0.01,
                      detach: bool = True
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    noise = torch.randn_like(fake_img) / math.sqrt(fake_img.shape[2] * fake_img.shape[3])
    (grad,) = autograd.grad(outputs=(fake_img * noise).sum(), inputs=latents,
                            create_graph=True)
    path_lengths = torch.sqrt(grad.pow(2).sum(2).mean(1))
    # the carried state is cut where this call reads it, or (the published fix) where it is
    # returned: each call trains the same
    path_mean = mean_path_length + decay * (path_lengths.mean() - mean_path_length)  # audit: fix here [stylegan2_mean_path_graph]
    path_penalty = (path_lengths - path_mean).pow(2).mean()
    if detach:
        return path_penalty, path_mean.detach(), path_lengths
    return path_penalty, path_mean, path_lengths  # audit: fix here


def stylegan2(seed: int, *, detach_mean: bool = True, size: int = 8, latent: int = 4,
              channel: int = 4, batch: int = 4, path_batch_shrink: int = 2,
              mixing: float = 0.9, lr: float = 0.002, r1: float = 10.0,
              path_regularize: float = 2.0, d_reg_every: int = 1, g_reg_every: int = 1
              ) -> RealCase:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    generator = Generator(size, latent, 2, channel, rng)
    discriminator = Discriminator(size, channel)
    g_ema = copy.deepcopy(generator)
    g_ema.eval()
    _accumulate(g_ema, generator, 0)
    g_reg_ratio = g_reg_every / (g_reg_every + 1)
    d_reg_ratio = d_reg_every / (d_reg_every + 1)
    g_optim = torch.optim.Adam(generator.parameters(), lr=lr * g_reg_ratio,
                               betas=(0 ** g_reg_ratio, 0.99 ** g_reg_ratio))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=lr * d_reg_ratio,
                               betas=(0 ** d_reg_ratio, 0.99 ** d_reg_ratio))
    images = torch.rand(3, batch, 3, size, size) * 2 - 1
    accum = 0.5 ** (32 / (10 * 1000))
    state: dict[str, object] = {"i": 0, "mean_path_length": 0}

    def mixing_noise(n: int) -> list[torch.Tensor]:
        if mixing > 0 and rng.random() < mixing:
            return list(torch.randn(2, n, latent).unbind(0))
        return [torch.randn(n, latent)]

    def step() -> dict[str, torch.Tensor]:
        i = state["i"]
        state["i"] = i + 1
        real_img = images[i % len(images)].clone()
        _requires_grad(generator, False)
        _requires_grad(discriminator, True)
        fake_img, _ = generator(mixing_noise(batch))
        fake_pred = discriminator(fake_img)
        real_pred = discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)
        # d_regularize (i % d_reg_every == 0)
        real_img.requires_grad = True
        real_pred = discriminator(real_img)
        r1_loss = d_r1_loss(real_pred, real_img)
        d_reg = r1 / 2 * r1_loss * d_reg_every + 0 * real_pred[0]
        _requires_grad(generator, True)
        _requires_grad(discriminator, False)
        fake_img, _ = generator(mixing_noise(batch))
        g_loss = g_nonsaturating_loss(discriminator(fake_img))
        # g_regularize (i % g_reg_every == 0)
        path_batch_size = max(1, batch // path_batch_shrink)
        fake_img, latents = generator(mixing_noise(path_batch_size), return_latents=True)
        path_loss, state["mean_path_length"], _ = g_path_regularize(
            fake_img, latents, state["mean_path_length"], detach=detach_mean)
        weighted_path_loss = path_regularize * g_reg_every * path_loss
        weighted_path_loss += 0 * fake_img[0, 0, 0, 0]
        _accumulate(g_ema, generator, accum)
        _requires_grad(discriminator, True)  # the next iteration's first lines, before D's step
        return {"d": d_loss, "r1": d_reg, "g": g_loss, "path": weighted_path_loss}

    return RealCase(
        "stylegan2" if detach_mean else "stylegan2_mean_path_graph",
        "rosinality/stylegan2-pytorch train.py@bef283a1c24087da704d16c30abc8e36e63efa0e",
        "https://github.com/rosinality/stylegan2-pytorch/commit/7550be431b7c1dc9982bbe3a336d2a"
        "2f4aec9f6e", "correct" if detach_mean else "carried", step,
        {"d": d_optim, "r1": d_optim, "g": g_optim, "path": g_optim},
        {"generator": generator, "discriminator": discriminator, "g_ema": g_ema})


# --- Alexander-H-Liu/End-to-end-ASR-Pytorch src/asr.py, src/module.py, bin/train_asr.py
# @1103d144423e8e692f1d18cd9db27a96cb49fb9d: the hybrid CTC/attention LAS (config
# asr_hybrid.yaml, ctc_weight 0.5, location-aware attention, one head, no value projection;
# the CNN prenet instead of VGG), Adadelta (lr 1, eps 1e-8; its weight init left out), teacher
# forcing at rate 1 (the scheduled-sampling branch never runs). The
# Attention module stores the projected encoder keys and values (self.key, self.value) and the
# location layer its previous alignment (prev_att) on first use, so later decoding steps of the
# utterance reuse them; ASR.forward calls self.attention.reset_mem() (with
# decoder.init_state) before decoding each batch. asr_no_reset_mem: that call left out, the
# next batch attends over the previous batch's stored keys, values and alignment, with their
# graph.


class CNNExtractor(nn.Module):
    def __init__(self, input_dim: int, out_dim: int) -> None:
        super().__init__()
        self.out_dim = out_dim
        self.extractor = nn.Sequential(nn.Conv1d(input_dim, out_dim, 4, stride=2, padding=1),
                                       nn.Conv1d(out_dim, out_dim, 4, stride=2, padding=1))

    def forward(self, feature: torch.Tensor, feat_len: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        feat_len = feat_len // 4
        feature = self.extractor(feature.transpose(1, 2)).transpose(1, 2)
        return feature, feat_len


class RNNLayer(nn.Module):
    """One (bidirectional) recurrent layer, a projection with tanh after it."""

    def __init__(self, input_dim: int, dim: int, bidirection: bool, proj: bool) -> None:
        super().__init__()
        rnn_out_dim = 2 * dim if bidirection else dim
        self.out_dim, self.proj = rnn_out_dim, proj
        self.layer = nn.LSTM(input_dim, dim, bidirectional=bidirection, num_layers=1,
                             batch_first=True)
        if proj:
            self.pj = nn.Linear(rnn_out_dim, rnn_out_dim)

    def forward(self, input_x: torch.Tensor, x_len: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        output, _ = self.layer(input_x)
        if self.proj:
            output = torch.tanh(self.pj(output))
        return output, x_len


class Encoder(nn.Module):
    def __init__(self, input_size: int, dim: int) -> None:
        super().__init__()
        cnn = CNNExtractor(input_size, out_dim=dim)
        rnn = RNNLayer(cnn.out_dim, dim, bidirection=True, proj=True)
        self.out_dim = rnn.out_dim
        self.layers = nn.ModuleList([cnn, rnn])

    def forward(self, input_x: torch.Tensor, enc_len: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        for layer in self.layers:
            input_x, enc_len = layer(input_x, enc_len)
        return input_x, enc_len


class LocationAwareAttention(nn.Module):
    def __init__(self, kernel_size: int, kernel_num: int, dim: int, num_head: int,
                 temperature: float) -> None:
        super().__init__()
        self.temperature, self.num_head = temperature, num_head
        self.softmax = nn.Softmax(dim=-1)
        self.loc_conv = nn.Conv1d(num_head, kernel_num, kernel_size=2 * kernel_size + 1,
                                  padding=kernel_size, bias=False)
        self.loc_proj = nn.Linear(kernel_num, dim, bias=False)
        self.gen_energy = nn.Linear(dim, 1)
        self.dim = dim
        self.reset_mem()

    def reset_mem(self) -> None:
        self.mask = None
        self.k_len = None
        self.prev_att = None

    def compute_mask(self, k: torch.Tensor, k_len: torch.Tensor) -> None:
        self.k_len = k_len
        bs, ts, _ = k.shape
        mask = np.zeros((bs, self.num_head, ts))
        for idx, sl in enumerate(k_len):
            mask[idx, :, sl:] = 1
        self.mask = torch.from_numpy(mask).to(dtype=torch.bool).view(-1, ts)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        bs_nh, ts, _ = k.shape
        bs = bs_nh // self.num_head
        if self.prev_att is None:
            self.prev_att = torch.zeros((bs, self.num_head, ts))
            for idx, sl in enumerate(self.k_len):
                self.prev_att[idx, :, :sl] = 1.0 / sl
        loc_context = torch.tanh(self.loc_proj(self.loc_conv(self.prev_att).transpose(1, 2)))
        loc_context = loc_context.unsqueeze(1).repeat(1, self.num_head, 1, 1).view(
            -1, ts, self.dim)
        energy = self.gen_energy(torch.tanh(k + q.unsqueeze(1) + loc_context)).squeeze(2)
        attn = self.softmax((energy / self.temperature).masked_fill(self.mask, -np.inf))
        output = torch.bmm(attn.unsqueeze(1), v).squeeze(1)
        attn = attn.view(bs, self.num_head, ts)
        self.prev_att = attn
        return output, attn


class Attention(nn.Module):
    def __init__(self, v_dim: int, q_dim: int, dim: int, num_head: int, temperature: float,
                 loc_kernel_size: int, loc_kernel_num: int) -> None:
        super().__init__()
        self.v_dim, self.dim, self.num_head = v_dim, dim, num_head
        self.proj_q = nn.Linear(q_dim, dim * num_head)
        self.proj_k = nn.Linear(v_dim, dim * num_head)
        self.att_layer = LocationAwareAttention(loc_kernel_size, loc_kernel_num, dim, num_head,
                                                temperature)
        self.key = self.value = self.mask = None

    def reset_mem(self) -> None:
        self.key = self.value = self.mask = None
        self.att_layer.reset_mem()

    def forward(self, dec_state: torch.Tensor, enc_feat: torch.Tensor, enc_len: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        bs = enc_feat.shape[0]
        query = torch.tanh(self.proj_q(dec_state)).view(bs * self.num_head, self.dim)
        if self.key is None:
            self.att_layer.compute_mask(enc_feat, enc_len)
            self.key = torch.tanh(self.proj_k(enc_feat))
            self.value = enc_feat  # v_proj False, one head
        context, attn = self.att_layer(query, self.key, self.value)
        return attn, context


class Decoder(nn.Module):
    def __init__(self, input_dim: int, vocab_size: int, dim: int, layer: int) -> None:
        super().__init__()
        self.dim, self.layer = dim, layer
        self.hidden_state: tuple[torch.Tensor, torch.Tensor] | None = None
        self.layers = nn.LSTM(input_dim, dim, num_layers=layer, batch_first=True)
        self.char_trans = nn.Linear(dim, vocab_size)

    def init_state(self, bs: int) -> None:
        self.hidden_state = (torch.zeros((self.layer, bs, self.dim)),
                             torch.zeros((self.layer, bs, self.dim)))

    def get_query(self) -> torch.Tensor:
        return self.hidden_state[0].transpose(0, 1).reshape(-1, self.dim * self.layer)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, self.hidden_state = self.layers(x.unsqueeze(1), self.hidden_state)
        x = x.squeeze(1)
        return self.char_trans(x), x


class ASR(nn.Module):
    def __init__(self, input_size: int, vocab_size: int, ctc_weight: float, enc_dim: int,
                 dec_dim: int, att_dim: int, reset_mem: bool = True) -> None:
        super().__init__()
        self.vocab_size, self.ctc_weight, self.reset_memory = vocab_size, ctc_weight, reset_mem
        self.encoder = Encoder(input_size, enc_dim)
        self.ctc_layer = nn.Linear(self.encoder.out_dim, vocab_size)
        self.dec_dim = dec_dim
        self.pre_embed = nn.Embedding(vocab_size, dec_dim)
        self.decoder = Decoder(self.encoder.out_dim + dec_dim, vocab_size, dec_dim, 1)
        self.attention = Attention(self.encoder.out_dim, dec_dim, att_dim, 1, 0.5, 2, 3)

    def forward(self, audio_feature: torch.Tensor, feature_len: torch.Tensor, decode_step: int,
                tf_rate: float, teacher: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        bs = audio_feature.shape[0]
        encode_feature, encode_len = self.encoder(audio_feature, feature_len)
        ctc_output = F.log_softmax(self.ctc_layer(encode_feature), dim=-1)
        self.decoder.init_state(bs)
        if self.reset_memory:
            self.attention.reset_mem()  # audit: fix here
        last_char = self.pre_embed(torch.zeros(bs, dtype=torch.long))
        output_seq = []
        teacher = self.pre_embed(teacher)
        for t in range(decode_step):
            _, context = self.attention(self.decoder.get_query(), encode_feature, encode_len)
            cur_char, _ = self.decoder(torch.cat([last_char, context], dim=-1))
            if tf_rate == 1 or torch.rand(1).item() <= tf_rate:
                last_char = teacher[:, t, :]
            output_seq.append(cur_char)
        return ctc_output, encode_len, torch.stack(output_seq, dim=1)


def las_asr(seed: int, *, reset_mem: bool = True, batch: int = 2, frames: int = 24,
            feat_dim: int = 8, vocab: int = 6, max_text: int = 3) -> RealCase:
    torch.manual_seed(seed)
    model = ASR(feat_dim, vocab, 0.5, enc_dim=4, dec_dim=4, att_dim=4, reset_mem=reset_mem)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0, eps=1e-8)
    seq_loss = nn.CrossEntropyLoss(ignore_index=0)
    ctc_loss = nn.CTCLoss(blank=0, zero_infinity=False)
    feats = torch.randn(3, batch, frames, feat_dim)
    feat_lens = torch.tensor([frames, frames - 4])
    texts = torch.randint(1, vocab, (3, batch, max_text))
    texts[:, 1, -1] = 0  # the second utterance one token shorter (padding 0)
    state = {"i": 0}

    def step() -> torch.Tensor:
        # the memory set back to None before each step runs it as ASR.forward's reset does
        i = state["i"] % len(feats)  # audit: fix here [asr_no_reset_mem]
        state["i"] += 1
        feat, feat_len, txt = feats[i], feat_lens, texts[i]
        txt_len = torch.sum(txt != 0, dim=-1)
        ctc_output, encode_len, att_output = model(feat, feat_len, int(max(txt_len)),
                                                   tf_rate=1.0, teacher=txt)
        total_loss = ctc_loss(ctc_output.transpose(0, 1), txt, encode_len,
                              txt_len) * model.ctc_weight
        b, t, _ = att_output.shape
        att_loss = seq_loss(att_output.view(b * t, -1), txt.view(-1))
        return total_loss + att_loss * (1 - model.ctc_weight)

    return RealCase(
        "las_asr" if reset_mem else "asr_no_reset_mem",
        "Alexander-H-Liu/End-to-end-ASR-Pytorch src/asr.py@1103d144423e8e692f1d18cd9db27a96cb4"
        "9fb9d", "https://github.com/Alexander-H-Liu/End-to-end-ASR-Pytorch/blob/1103d144423e8"
        "e692f1d18cd9db27a96cb49fb9d/src/asr.py (self.attention.reset_mem() before decoding)",
        "correct" if reset_mem else "carried", step, optimizer, {"model": model})


# --- SeanNaren/deepspeech.pytorch deepspeech_pytorch/model.py@b88a631ef6b96553e16bbaa5bd6a621
# 435bed278: DeepSpeech2's training_step: a masked two-layer 2-D convolution over the
# spectrogram (BatchNorm, Hardtanh(0, 20)), bidirectional LSTM layers on packed sequences (the
# two directions summed; BatchNorm before all but the first), a sequence-wise BatchNorm and
# Linear, log_softmax over time-major outputs, CTCLoss(blank '_', reduction 'sum',
# zero_infinity); AdamW (the default adam config). forward returns each layer's final state
# (hs, added by #690 to carry it across chunks of a long file at inference); training_step
# passes none and drops the returned states: correct.


class SequenceWise(nn.Module):
    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, n = x.size(0), x.size(1)
        return self.module(x.view(t * n, -1)).view(t, n, -1)


class MaskConv(nn.Module):
    def __init__(self, seq_module: nn.Sequential) -> None:
        super().__init__()
        self.seq_module = seq_module

    def forward(self, x: torch.Tensor, lengths: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        for module in self.seq_module:
            x = module(x)
            mask = torch.BoolTensor(x.size()).fill_(0)
            for i, length in enumerate(lengths):
                length = length.item()
                if mask[i].size(2) - length > 0:
                    mask[i].narrow(2, length, mask[i].size(2) - length).fill_(1)
            x = x.masked_fill(mask, 0)
        return x, lengths


class BatchRNN(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, bidirectional: bool = True,
                 batch_norm: bool = True) -> None:
        super().__init__()
        self.bidirectional = bidirectional
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size,
                           bidirectional=bidirectional, bias=True)

    def forward(self, x: torch.Tensor, output_lengths: torch.Tensor,
                h: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x = nn.utils.rnn.pack_padded_sequence(x, output_lengths)
        x, h = self.rnn(x, h)
        x, _ = nn.utils.rnn.pad_packed_sequence(x)
        if self.bidirectional:
            x = x.view(x.size(0), x.size(1), 2, -1).sum(2).view(x.size(0), x.size(1), -1)
        return x, h


class DeepSpeech(nn.Module):
    def __init__(self, num_classes: int, freq: int, hidden_size: int, hidden_layers: int
                 ) -> None:
        super().__init__()
        self.conv = MaskConv(nn.Sequential(
            nn.Conv2d(1, 2, kernel_size=(5, 3), stride=(2, 2), padding=(2, 1)),
            nn.BatchNorm2d(2), nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(2, 2, kernel_size=(3, 3), stride=(2, 1), padding=(1, 1)),
            nn.BatchNorm2d(2), nn.Hardtanh(0, 20, inplace=True)))
        rnn_input_size = (freq + 2 * 2 - 5) // 2 + 1
        rnn_input_size = ((rnn_input_size + 2 * 1 - 3) // 2 + 1) * 2
        self.rnns = nn.Sequential(
            BatchRNN(rnn_input_size, hidden_size, batch_norm=False),
            *(BatchRNN(hidden_size, hidden_size) for _ in range(hidden_layers - 1)))
        self.fc = nn.Sequential(SequenceWise(nn.Sequential(
            nn.BatchNorm1d(hidden_size), nn.Linear(hidden_size, num_classes, bias=False))))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor,
                hs: list[tuple[torch.Tensor, torch.Tensor] | None] | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        output_lengths = self.get_seq_lens(lengths.cpu().int())
        x, _ = self.conv(x, output_lengths)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])
        x = x.transpose(1, 2).transpose(0, 1).contiguous()  # TxNxH
        if hs is None:
            hs = [None] * len(self.rnns)
        new_hs = []
        for i, rnn in enumerate(self.rnns):
            x, h = rnn(x, output_lengths, hs[i])
            new_hs.append(h)
        x = self.fc(x).transpose(0, 1)
        return x, output_lengths, new_hs  # training mode: no softmax

    def get_seq_lens(self, input_length: torch.Tensor) -> torch.Tensor:
        seq_len = input_length
        for m in self.conv.modules():
            if type(m) is nn.Conv2d:
                seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1)
                            - 1) // m.stride[1] + 1)
        return seq_len.int()


def deepspeech2(seed: int, *, batch: int = 2, freq: int = 8, frames: int = 12,
                num_classes: int = 5) -> RealCase:
    torch.manual_seed(seed)
    model = DeepSpeech(num_classes, freq, hidden_size=4, hidden_layers=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.5e-4, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=1e-5)
    criterion = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    spects = torch.randn(3, batch, 1, freq, frames)
    percentages = torch.tensor([1.0, 0.75])  # the loader sorts a batch by length, longest first
    target_sizes = torch.tensor([3, 2])
    targets = torch.randint(1, num_classes, (3, int(target_sizes.sum())))
    state = {"i": 0}

    def step() -> torch.Tensor:
        i = state["i"] % len(spects)
        state["i"] += 1
        inputs, input_percentages = spects[i], percentages.clone()
        input_sizes = input_percentages.mul_(int(inputs.size(3))).int()
        out, output_sizes, _hs = model(inputs, input_sizes)
        out = out.transpose(0, 1).log_softmax(-1)  # TxNxH
        return criterion(out, targets[i], output_sizes, target_sizes)

    return RealCase("deepspeech2", "SeanNaren/deepspeech.pytorch deepspeech_pytorch/model.py@b88a"
                    "631ef6b96553e16bbaa5bd6a621435bed278",
                    "https://github.com/SeanNaren/deepspeech.pytorch/pull/690", "correct", step,
                    optimizer, {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "stylegan2": stylegan2,
    "stylegan2_mean_path_graph": lambda s: stylegan2(s, detach_mean=False),
    "las_asr": las_asr,
    "asr_no_reset_mem": lambda s: las_asr(s, reset_mem=False),
    "deepspeech2": deepspeech2,
}

TWINS: dict[str, str] = {
    "stylegan2_mean_path_graph": "stylegan2",
    "asr_no_reset_mem": "las_asr",
}
