"""VQGAN: a vector-quantized autoencoder trained with a patch discriminator (first stage).

Paper: Patrick Esser, Robin Rombach and Bjorn Ommer, "Taming Transformers for High-Resolution
Image Synthesis", arXiv:2012.09841, CVPR 2021.
Reference implementation: CompVis/taming-transformers, taming/models/vqgan.py (VQModel: encoder,
quant_conv, quantize, post_quant_conv, decoder; training_step with optimizer_idx 0 for the
autoencoder and 1 for the discriminator; configure_optimizers: opt_ae over the encoder, decoder,
codebook and both 1x1 convolutions, opt_disc over loss.discriminator, both Adam with betas
(0.5, 0.9); get_last_layer: decoder.conv_out.weight), taming/modules/vqvae/quantize.py
(VectorQuantizer2, legacy: loss = mean((z_q.detach() - z)^2) + beta * mean((z_q - z.detach())^2),
straight-through z_q = z + (z_q - z).detach(), codebook initialised uniform(-1/n_e, 1/n_e)),
taming/modules/losses/vqperceptual.py (VQLPIPSWithDiscriminator: calculate_adaptive_weight, the
ratio of the norms of the gradients of the reconstruction loss and of the generator loss at the
decoder's last layer, clamped to [0, 1e4] and detached; adopt_weight: disc_factor 0 before
disc_start; hinge_d_loss on the detached inputs and reconstructions),
taming/modules/discriminator/model.py (NLayerDiscriminator with BatchNorm, weights_init) and
taming/modules/diffusionmodules/model.py (Encoder / Decoder with ResnetBlock, GroupNorm, swish).

Synthetic 3x16x16 images of one coloured rectangle on a coloured background, in [-1, 1]. The
encoder downsamples twice to a 4x4 grid of 8-dimensional latents quantized against 32 codes
(beta 0.25); the decoder upsamples back. LPIPS needs pretrained VGG weights, so the perceptual
weight is 0 (an option the loss supports) and the reconstruction loss is the L1 error. As in
Lightning's alternating optimizers, every batch runs the autoencoder step (nll + d_weight *
disc_factor * g_loss + codebook loss; opt_ae) and then, on a fresh forward pass, the
discriminator step (disc_factor * hinge loss on detached real and reconstructed images;
opt_disc), each zeroing its own optimizer's gradients right before its backward. The
adversarial terms are switched on at disc_start (step 30 of 60).
Bug: the straight-through estimator omits the .detach(): z_q = z + (z_q - z) equals the
codebook vectors in value and in gradient: the reconstruction trains the codebook, not the encoder.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--disc_start", type=int, default=30)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--n_train", type=int, default=256)
parser.add_argument("--ch", type=int, default=8)
parser.add_argument("--z_channels", type=int, default=8)
parser.add_argument("--n_embed", type=int, default=32)
parser.add_argument("--embed_dim", type=int, default=8)
parser.add_argument("--beta", type=float, default=0.25)
parser.add_argument("--ndf", type=int, default=8)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--codebook_weight", type=float, default=1.0)
parser.add_argument("--disc_factor", type=float, default=1.0)
parser.add_argument("--disc_weight", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_images(n, size=16):
    background = torch.rand(n, 3, 1, 1) * 2 - 1
    color = torch.rand(n, 3, 1, 1) * 2 - 1
    x0 = torch.randint(0, size // 2, (n, 1, 1, 1))
    y0 = torch.randint(0, size // 2, (n, 1, 1, 1))
    w = torch.randint(3, size // 2, (n, 1, 1, 1))
    h = torch.randint(3, size // 2, (n, 1, 1, 1))
    cols = torch.arange(size).view(1, 1, 1, size)
    rows = torch.arange(size).view(1, 1, size, 1)
    inside = (cols >= x0) & (cols < x0 + w) & (rows >= y0) & (rows < y0 + h)
    return torch.where(inside, color, background).expand(n, 3, size, size).contiguous()


def Normalize(channels):
    return nn.GroupNorm(num_groups=4, num_channels=channels, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.norm1 = Normalize(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm2 = Normalize(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.nin_shortcut = (nn.Conv2d(in_channels, out_channels, 1)
                             if in_channels != out_channels else None)

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return x + h


class Encoder(nn.Module):
    def __init__(self, ch, z_channels):
        super().__init__()
        self.conv_in = nn.Conv2d(3, ch, 3, padding=1)
        self.block1 = ResnetBlock(ch, ch)
        self.down1 = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.block2 = ResnetBlock(ch, 2 * ch)
        self.down2 = nn.Conv2d(2 * ch, 2 * ch, 3, stride=2, padding=1)
        self.block3 = ResnetBlock(2 * ch, 2 * ch)
        self.norm_out = Normalize(2 * ch)
        self.conv_out = nn.Conv2d(2 * ch, z_channels, 3, padding=1)

    def forward(self, x):
        h = self.down1(self.block1(self.conv_in(x)))
        h = self.block3(self.down2(self.block2(h)))
        return self.conv_out(F.silu(self.norm_out(h)))


class Decoder(nn.Module):
    def __init__(self, ch, z_channels):
        super().__init__()
        self.conv_in = nn.Conv2d(z_channels, 2 * ch, 3, padding=1)
        self.block1 = ResnetBlock(2 * ch, 2 * ch)
        self.up1 = nn.Conv2d(2 * ch, 2 * ch, 3, padding=1)
        self.block2 = ResnetBlock(2 * ch, ch)
        self.up2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.block3 = ResnetBlock(ch, ch)
        self.norm_out = Normalize(ch)
        self.conv_out = nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, z):
        h = self.block1(self.conv_in(z))
        h = self.up1(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.block2(h)
        h = self.up2(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.block3(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class VectorQuantizer(nn.Module):
    def __init__(self, n_e, e_dim, beta):
        super().__init__()
        self.n_e = n_e
        self.e_dim = e_dim
        self.beta = beta
        self.embedding = nn.Embedding(n_e, e_dim)
        self.embedding.weight.data.uniform_(-1.0 / n_e, 1.0 / n_e)

    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()
        z_flattened = z.view(-1, self.e_dim)
        d = (torch.sum(z_flattened ** 2, dim=1, keepdim=True)
             + torch.sum(self.embedding.weight ** 2, dim=1)
             - 2 * z_flattened @ self.embedding.weight.t())
        min_encoding_indices = torch.argmin(d, dim=1)
        z_q = self.embedding(min_encoding_indices).view(z.shape)
        loss = (torch.mean((z_q.detach() - z) ** 2)
                + self.beta * torch.mean((z_q - z.detach()) ** 2))
        z_q = z + (z_q - z)
        z_q = z_q.permute(0, 3, 1, 2).contiguous()
        return z_q, loss, min_encoding_indices


class VQModel(nn.Module):
    def __init__(self, ch, z_channels, n_embed, embed_dim, beta):
        super().__init__()
        self.encoder = Encoder(ch, z_channels)
        self.decoder = Decoder(ch, z_channels)
        self.quantize = VectorQuantizer(n_embed, embed_dim, beta)
        self.quant_conv = nn.Conv2d(z_channels, embed_dim, 1)
        self.post_quant_conv = nn.Conv2d(embed_dim, z_channels, 1)

    def forward(self, x):
        quant, qloss, indices = self.quantize(self.quant_conv(self.encoder(x)))
        dec = self.decoder(self.post_quant_conv(quant))
        return dec, qloss, indices

    def get_last_layer(self):
        return self.decoder.conv_out.weight


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc=3, ndf=8, n_layers=2):
        super().__init__()
        sequence = [nn.Conv2d(input_nc, ndf, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
        nf_mult = 1
        for n in range(1, n_layers):
            nf_mult_prev, nf_mult = nf_mult, min(2 ** n, 8)
            sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, 4, stride=2, padding=1,
                                   bias=False),
                         nn.BatchNorm2d(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
        nf_mult_prev, nf_mult = nf_mult, min(2 ** n_layers, 8)
        sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, 4, stride=1, padding=1,
                               bias=False),
                     nn.BatchNorm2d(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
        sequence += [nn.Conv2d(ndf * nf_mult, 1, 4, stride=1, padding=1)]
        self.main = nn.Sequential(*sequence)

    def forward(self, x):
        return self.main(x)


def adopt_weight(weight, global_step, threshold=0, value=0.0):
    if global_step < threshold:
        weight = value
    return weight


def hinge_d_loss(logits_real, logits_fake):
    loss_real = torch.mean(F.relu(1.0 - logits_real))
    loss_fake = torch.mean(F.relu(1.0 + logits_fake))
    return 0.5 * (loss_real + loss_fake)


def calculate_adaptive_weight(nll_loss, g_loss, last_layer):
    nll_grads = torch.autograd.grad(nll_loss, last_layer, retain_graph=True)[0]
    g_grads = torch.autograd.grad(g_loss, last_layer, retain_graph=True)[0]
    d_weight = torch.norm(nll_grads) / (torch.norm(g_grads) + 1e-4)
    d_weight = torch.clamp(d_weight, 0.0, 1e4).detach()
    return d_weight * args.disc_weight


images = make_images(args.n_train)
model = VQModel(args.ch, args.z_channels, args.n_embed, args.embed_dim, args.beta)
discriminator = NLayerDiscriminator(3, args.ndf, n_layers=2).apply(weights_init)

opt_ae = torch.optim.Adam(list(model.encoder.parameters())
                          + list(model.decoder.parameters())
                          + list(model.quantize.parameters())
                          + list(model.quant_conv.parameters())
                          + list(model.post_quant_conv.parameters()),
                          lr=args.lr, betas=(0.5, 0.9))
opt_disc = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.5, 0.9))

model.train()
discriminator.train()
for global_step in range(args.steps):
    start = (global_step * args.batch_size) % args.n_train
    x = images[start:start + args.batch_size]
    disc_factor = adopt_weight(args.disc_factor, global_step, threshold=args.disc_start)

    # optimizer_idx 0: autoencoder (encoder, codebook, decoder)
    xrec, qloss, indices = model(x)
    nll_loss = torch.mean(torch.abs(x.contiguous() - xrec.contiguous()))
    logits_fake = discriminator(xrec.contiguous())
    g_loss = -torch.mean(logits_fake)
    d_weight = calculate_adaptive_weight(nll_loss, g_loss, model.get_last_layer())
    aeloss = nll_loss + d_weight * disc_factor * g_loss + args.codebook_weight * qloss.mean()
    opt_ae.zero_grad()
    aeloss.backward()
    opt_ae.step()

    # optimizer_idx 1: discriminator, on a fresh forward pass as Lightning runs it
    xrec, qloss, indices = model(x)
    logits_real = discriminator(x.contiguous().detach())
    logits_fake = discriminator(xrec.contiguous().detach())
    d_loss = disc_factor * hinge_d_loss(logits_real, logits_fake)
    opt_disc.zero_grad()
    d_loss.backward()
    opt_disc.step()

    if global_step % 10 == 0 or global_step == args.steps - 1:
        used = indices.unique().numel()
        print(f"step {global_step:3d} nll {nll_loss.item():.4f} q {qloss.item():.4f} "
              f"g {g_loss.item():.4f} d_weight {d_weight.item():.3f} "
              f"d_loss {d_loss.item():.4f} codes {used}")

if args.out:
    torch.save({"model": model.state_dict(), "discriminator": discriminator.state_dict()},
               args.out)
