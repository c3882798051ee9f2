"""SAGAN: a self-attention GAN with spectral norm, the hinge loss and two time-scale updates.

Paper: Han Zhang, Ian Goodfellow, Dimitris Metaxas and Augustus Odena, "Self-Attention Generative
Adversarial Networks", ICML 2019, arXiv:1805.08318 (2018).
Reference implementations: heykeetae/Self-Attention-GAN, sagan_models.py (Self_Attn: 1x1 query
and key convolutions to in_dim // 8 channels and a 1x1 value convolution, a softmax over the
N = W * H positions, out = gamma * attention_output + x with gamma = nn.Parameter(torch.zeros(1));
Generator: spectral-normed transposed convolutions with batch norm and ReLU, an attention layer,
a plain transposed convolution and tanh; Discriminator: spectral-normed convolutions with
LeakyReLU(0.1), an attention layer and a plain last convolution), trainer.py (Trainer.train with
adv_loss 'hinge': d_loss = relu(1 - D(x)).mean() + relu(1 + D(G(z))).mean(), reset_grad,
backward, d_optimizer.step; then g_loss = -D(G(z')).mean() on a fresh z', reset_grad, backward,
g_optimizer.step; Trainer.build_model: Adam for G at g_lr and for D at d_lr), parameter.py
(g_lr 1e-4, d_lr 4e-4, beta1 0.0, beta2 0.9); brain-research/self-attention-gan (the authors'
TensorFlow code, sn_non_local_block_sim with sigma initialised to zero, the hinge loss and the
two learning rates). The learned gamma starts at zero, so each attention block begins as the
identity and the network learns how much non-local evidence to mix in.

The data are made here: 16x16 one-channel images of a Gaussian blob and its mirror image across
the vertical midline (a long-range dependency), scaled to [-1, 1]. G maps z (16) to 4x4x32, to
8x8x16, applies self-attention at 8x8 and a transposed convolution with tanh to 16x16; D maps an
image to 8x8x16, applies self-attention at 8x8, then 4x4x32 and a 4x4 convolution to one logit.
The spectral norm is torch's parametrization (one power iteration per training forward). As in
pix2pix's set_requires_grad and BigGAN-PyTorch's toggle_grad (ajbrock/BigGAN-PyTorch,
train_fns.py), D's parameters are switched off for the generator step and back on for D's
own step; the generated batch of the D step is not detached, as in the reference, since
reset_grad zeroes both optimizers before every backward. Adam(betas (0.0, 0.9)) with the two
time-scale rates 1e-4 for G and 4e-4 for D, one D step per G step.
Bug: D's parameters are switched off for the generator step but never switched back on for
D's own step, so D is frozen from the second iteration on and only G keeps training.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--total_step", type=int, default=40)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--imsize", type=int, default=16)
parser.add_argument("--z_dim", type=int, default=16)
parser.add_argument("--g_conv_dim", type=int, default=8)
parser.add_argument("--d_conv_dim", type=int, default=16)
parser.add_argument("--g_lr", type=float, default=1e-4)
parser.add_argument("--d_lr", type=float, default=4e-4)
parser.add_argument("--beta1", type=float, default=0.0)
parser.add_argument("--beta2", type=float, default=0.9)
parser.add_argument("--log_step", type=int, default=10)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def mirrored_blobs(n, size):
    coords = torch.arange(size).float()
    row = torch.rand(n, 1, 1) * (size - 4) + 2
    col = torch.rand(n, 1, 1) * (size / 2 - 3) + 1
    width = 1.0 + torch.rand(n, 1, 1)
    ys, xs = coords.view(1, size, 1), coords.view(1, 1, size)
    left = torch.exp(-((ys - row) ** 2 + (xs - col) ** 2) / (2 * width ** 2))
    right = torch.exp(-((ys - row) ** 2 + (xs - (size - 1 - col)) ** 2) / (2 * width ** 2))
    img = torch.clamp(left + right, 0.0, 1.0)
    return (img * 2 - 1).unsqueeze(1)


class Self_Attn(nn.Module):
    def __init__(self, in_dim):
        super().__init__()
        self.query_conv = nn.Conv2d(in_dim, in_dim // 8, 1)
        self.key_conv = nn.Conv2d(in_dim, in_dim // 8, 1)
        self.value_conv = nn.Conv2d(in_dim, in_dim, 1)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        b, c, w, h = x.shape
        query = self.query_conv(x).view(b, -1, w * h).permute(0, 2, 1)
        key = self.key_conv(x).view(b, -1, w * h)
        attention = F.softmax(torch.bmm(query, key), dim=-1)
        value = self.value_conv(x).view(b, -1, w * h)
        out = torch.bmm(value, attention.permute(0, 2, 1)).view(b, c, w, h)
        return self.gamma * out + x, attention


class Generator(nn.Module):
    def __init__(self, z_dim, conv_dim):
        super().__init__()
        self.l1 = nn.Sequential(spectral_norm(nn.ConvTranspose2d(z_dim, conv_dim * 4, 4)),
                                nn.BatchNorm2d(conv_dim * 4), nn.ReLU())
        self.l2 = nn.Sequential(spectral_norm(nn.ConvTranspose2d(conv_dim * 4, conv_dim * 2,
                                                                 4, 2, 1)),
                                nn.BatchNorm2d(conv_dim * 2), nn.ReLU())
        self.attn = Self_Attn(conv_dim * 2)
        self.last = nn.Sequential(nn.ConvTranspose2d(conv_dim * 2, 1, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        out = self.l2(self.l1(z.view(z.size(0), z.size(1), 1, 1)))
        out, p = self.attn(out)
        return self.last(out), p


class Discriminator(nn.Module):
    def __init__(self, conv_dim):
        super().__init__()
        self.l1 = nn.Sequential(spectral_norm(nn.Conv2d(1, conv_dim, 4, 2, 1)), nn.LeakyReLU(0.1))
        self.attn = Self_Attn(conv_dim)
        self.l2 = nn.Sequential(spectral_norm(nn.Conv2d(conv_dim, conv_dim * 2, 4, 2, 1)),
                                nn.LeakyReLU(0.1))
        self.last = nn.Conv2d(conv_dim * 2, 1, 4)

    def forward(self, x):
        out, p = self.attn(self.l1(x))
        return self.last(self.l2(out)).squeeze(), p


G = Generator(args.z_dim, args.g_conv_dim)
D = Discriminator(args.d_conv_dim)
g_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, G.parameters()), args.g_lr,
                               [args.beta1, args.beta2])
d_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, D.parameters()), args.d_lr,
                               [args.beta1, args.beta2])


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


dataset = mirrored_blobs(args.total_step * args.batch_size, args.imsize)
fixed_z = torch.randn(64, args.z_dim)

for step in range(args.total_step):
    D.train()
    G.train()
    real_images = dataset[step * args.batch_size:(step + 1) * args.batch_size]

    # ================== Train D ================== #
    d_out_real, dr = D(real_images)
    d_loss_real = F.relu(1.0 - d_out_real).mean()
    z = torch.randn(real_images.size(0), args.z_dim)
    fake_images, gf = G(z)
    d_out_fake, df = D(fake_images)
    d_loss_fake = F.relu(1.0 + d_out_fake).mean()
    d_loss = d_loss_real + d_loss_fake
    reset_grad()
    d_loss.backward()
    d_optimizer.step()

    # ================== Train G ================== #
    D.requires_grad_(False)
    z = torch.randn(real_images.size(0), args.z_dim)
    fake_images, _ = G(z)
    g_out_fake, _ = D(fake_images)
    g_loss_fake = -g_out_fake.mean()
    reset_grad()
    g_loss_fake.backward()
    g_optimizer.step()

    if (step + 1) % args.log_step == 0:
        print(f"step [{step + 1}/{args.total_step}] d_loss {d_loss.item():.4f} "
              f"g_loss {g_loss_fake.item():.4f} d_out_real {d_out_real.mean().item():.4f} "
              f"gamma_G {G.attn.gamma.item():.5f} gamma_D {D.attn.gamma.item():.5f}")

G.eval()
with torch.no_grad():
    samples, _ = G(fixed_z)
    mirror_error = (samples - samples.flip(-1)).abs().mean()
print(f"sample mirror asymmetry {mirror_error.item():.4f}")


def weights(net):
    # the attention gammas are saved apart, under their own keys
    return {k: v for k, v in net.state_dict().items() if not k.endswith("gamma")}


if args.out:
    torch.save({"G": weights(G), "D": weights(D),
                "G_attn_gamma": G.attn.gamma.detach().clone(),
                "D_attn_gamma": D.attn.gamma.detach().clone()}, args.out)
