"""SRGAN: an SRResNet generator pre-trained with the pixel MSE, then trained adversarially against
a discriminator with the perceptual (content) loss of a frozen feature network.

Paper: Christian Ledig, Lucas Theis, Ferenc Huszar, Jose Caballero, Andrew Cunningham, Alejandro
Acosta, Andrew Aitken, Alykhan Tejani, Johannes Totz, Zehan Wang and Wenzhe Shi,
"Photo-Realistic Single Image Super-Resolution Using a Generative Adversarial Network",
CVPR 2017, arXiv:1609.04802.
Reference implementation: Lornatang/SRGAN-PyTorch, model.py (ResidualConvBlock: conv-BN-PReLU-
conv-BN plus the identity; UpsampleBlock: conv to 4x the channels, PixelShuffle(2), PReLU;
Generator: 9x9 conv + PReLU, the residual trunk, conv-BN, the long skip, two upsample blocks, a
9x9 conv and a clamp to [0, 1]; Discriminator: conv-BN-LeakyReLU stages with stride 2 every
other layer and a two-layer classifier that returns a logit; ContentLoss: an ImageNet-normalised
VGG19 feature extractor put in eval mode with requires_grad False on every parameter, the MSE
between the feature maps of the SR and the HR image), train_srresnet.py (train: zero_grad,
pixel MSE, backward, Adam step) and train_srgan.py (train: sr = generator(lr) once; the
discriminator step with its requires_grad set True, d_optimizer.zero_grad(), BCE-with-logits of
D(hr) against 1 and of D(sr.detach()) against 0, each backward, d_optimizer.step(); then the
generator step with the discriminator's requires_grad set False, g_optimizer.zero_grad(),
content_weight * content loss + adversarial_weight * BCE(D(sr), 1), backward,
g_optimizer.step()).

The HR images are 3x16x16 smooth random textures in [0, 1] (three random low-frequency
sinusoids per channel through a tanh); the LR inputs are their 4x bicubic (antialiased)
downsamplings. The generator is the SRResNet layout with 16 channels and two residual blocks
(Kaiming-normal convolutions, except that the last 9x9 convolution starts near zero with a bias
of 0.5 so that the [0, 1] clamp does not saturate at the start); the discriminator has four
conv stages (16 to 32 channels, down to 4x4) and a 64-unit classifier. No pre-trained VGG19 can
be loaded here, so the content loss uses a small fixed, randomly initialised convolutional
feature network with the same treatment: ImageNet normalisation, eval mode, every parameter
frozen (the HR features are taken under torch.no_grad(), the SR features with their graph).
Phase 1 pre-trains the generator as SRResNet with the pixel MSE and its own Adam. Phase 2 builds
fresh Adams for the generator and the discriminator and runs the SRGAN loop: the discriminator
step on D(hr) and D(sr.detach()), then the generator step on the content loss (weight 1) plus
the adversarial loss (weight 1e-3) with the discriminator's parameters not requiring grad.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--srresnet_steps", type=int, default=30)
parser.add_argument("--gan_steps", type=int, default=30)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--hr_size", type=int, default=16)
parser.add_argument("--upscale", type=int, default=4)
parser.add_argument("--channels", type=int, default=16)
parser.add_argument("--num_blocks", type=int, default=2)
parser.add_argument("--srresnet_lr", type=float, default=2e-3)
parser.add_argument("--g_lr", type=float, default=2e-4)
parser.add_argument("--d_lr", type=float, default=2e-4)
parser.add_argument("--content_weight", type=float, default=1.0)
parser.add_argument("--adversarial_weight", type=float, default=1e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_batch(n):
    size = args.hr_size
    grid = torch.linspace(0.0, 1.0, size)
    yy, xx = torch.meshgrid(grid, grid, indexing="ij")
    hr = torch.zeros(n, 3, size, size)
    for _ in range(3):
        freq = 0.3 + torch.rand(n, 3, 2)
        phase = 2.0 * math.pi * torch.rand(n, 3, 1, 1)
        amp = torch.rand(n, 3, 1, 1)
        arg = freq[..., 0, None, None] * yy + freq[..., 1, None, None] * xx
        hr = hr + amp * torch.sin(2.0 * math.pi * arg + phase)
    hr = (0.5 + 0.5 * torch.tanh(hr)).clamp(0.0, 1.0)
    lr = F.interpolate(hr, scale_factor=1.0 / args.upscale, mode="bicubic",
                       align_corners=False, antialias=True).clamp(0.0, 1.0)
    return lr, hr


class ResidualConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.rcb = nn.Sequential(
            nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(channels),
            nn.PReLU(),
            nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x):
        return x + self.rcb(x)


class UpsampleBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.upsample_block = nn.Sequential(
            nn.Conv2d(channels, channels * 4, 3, 1, 1),
            nn.PixelShuffle(2),
            nn.PReLU(),
        )

    def forward(self, x):
        return self.upsample_block(x)


class Generator(nn.Module):
    def __init__(self, channels, num_blocks, upscale):
        super().__init__()
        self.conv_block1 = nn.Sequential(nn.Conv2d(3, channels, 9, 1, 4), nn.PReLU())
        self.trunk = nn.Sequential(*[ResidualConvBlock(channels) for _ in range(num_blocks)])
        self.conv_block2 = nn.Sequential(nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
                                         nn.BatchNorm2d(channels))
        n_up = int(math.log2(upscale))
        self.upsampling = nn.Sequential(*[UpsampleBlock(channels) for _ in range(n_up)])
        self.conv_block3 = nn.Conv2d(channels, 3, 9, 1, 4)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight)
                if module.bias is not None:
                    nn.init.constant_(module.bias, 0.0)
        nn.init.normal_(self.conv_block3.weight, 0.0, 1e-3)
        nn.init.constant_(self.conv_block3.bias, 0.5)

    def forward(self, x):
        out1 = self.conv_block1(x)
        out = self.trunk(out1)
        out2 = self.conv_block2(out)
        out = self.upsampling(out1 + out2)
        out = self.conv_block3(out)
        return torch.clamp(out, 0.0, 1.0)


class Discriminator(nn.Module):
    def __init__(self, hr_size):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2),
            nn.Conv2d(32, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(32 * (hr_size // 4) ** 2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class ContentLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, 1, 1),
        )
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.feature_extractor.eval()
        for model_parameters in self.feature_extractor.parameters():
            model_parameters.requires_grad = False

    def forward(self, sr_tensor, hr_tensor):
        sr_feature = self.feature_extractor((sr_tensor - self.mean) / self.std)
        with torch.no_grad():
            hr_feature = self.feature_extractor((hr_tensor - self.mean) / self.std)
        return F.mse_loss(sr_feature, hr_feature)


generator = Generator(args.channels, args.num_blocks, args.upscale)
discriminator = Discriminator(args.hr_size)
content_criterion = ContentLoss()
pixel_criterion = nn.MSELoss()
adversarial_criterion = nn.BCEWithLogitsLoss()

# Phase 1: SRResNet pre-training with the pixel MSE.
srresnet_optimizer = torch.optim.Adam(generator.parameters(), args.srresnet_lr, (0.9, 0.999))
generator.train()
for step in range(args.srresnet_steps):
    lr, hr = make_batch(args.batch_size)
    srresnet_optimizer.zero_grad()
    sr = generator(lr)
    pixel_loss = pixel_criterion(sr, hr)
    pixel_loss.backward()
    srresnet_optimizer.step()
    if step % 10 == 0 or step == args.srresnet_steps - 1:
        psnr = 10.0 * torch.log10(1.0 / pixel_loss.detach())
        print(f"srresnet step {step:3d} mse {pixel_loss.item():.5f} psnr {psnr.item():.2f}")

# Phase 2: SRGAN training from the pre-trained generator.
d_optimizer = torch.optim.Adam(discriminator.parameters(), args.d_lr, (0.9, 0.999))
g_optimizer = torch.optim.Adam(generator.parameters(), args.g_lr, (0.9, 0.999))
discriminator.train()
generator.train()
for step in range(args.gan_steps):
    lr, hr = make_batch(args.batch_size)
    real_label = torch.full([lr.size(0), 1], 1.0)
    fake_label = torch.full([lr.size(0), 1], 0.0)
    sr = generator(lr)

    for p in discriminator.parameters():
        p.requires_grad = True
    d_optimizer.zero_grad()
    hr_output = discriminator(hr)
    d_loss_hr = adversarial_criterion(hr_output, real_label)
    d_loss_hr.backward()
    sr_output = discriminator(sr.detach())
    d_loss_sr = adversarial_criterion(sr_output, fake_label)
    d_loss_sr.backward()
    d_optimizer.step()
    d_loss = d_loss_hr + d_loss_sr

    for p in discriminator.parameters():
        p.requires_grad = False
    g_optimizer.zero_grad()
    output = discriminator(sr)
    content_loss = args.content_weight * content_criterion(sr, hr)
    adversarial_loss = args.adversarial_weight * adversarial_criterion(output, real_label)
    g_loss = content_loss + adversarial_loss
    g_loss.backward()
    g_optimizer.step()
    if step % 10 == 0 or step == args.gan_steps - 1:
        print(f"srgan step {step:3d} d_loss {d_loss.item():.4f} content {content_loss.item():.5f}"
              f" adversarial {adversarial_loss.item():.5f}")

generator.eval()
with torch.no_grad():
    lr, hr = make_batch(64)
    mse = pixel_criterion(generator(lr), hr)
print(f"eval psnr {(10.0 * torch.log10(1.0 / mse)).item():.2f}")

if args.out:
    torch.save({
        "generator": generator.state_dict(),
        "discriminator": discriminator.state_dict(),
        "content_criterion": content_criterion.state_dict(),
    }, args.out)
