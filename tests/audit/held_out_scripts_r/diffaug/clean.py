"""Differentiable Augmentation (DiffAugment) for data-efficient GAN training at a tiny size,
written after Zhao, Liu, Lin, Zhu and Han, "Differentiable Augmentation for Data-Efficient GAN
Training" (NeurIPS 2020, arXiv:2006.10738): with little data the discriminator memorises the
real images, so the same random, differentiable augmentation T (colour, translation, cutout) is
applied to every image the discriminator sees, real and generated, in the discriminator's update
and in the generator's, where the generator's gradient must flow back through T into G(z). With
mit-han-lab/data-efficient-gans (https://github.com/mit-han-lab/data-efficient-gans,
DiffAugment-biggan-cifar: DiffAugment_pytorch.py DiffAugment with the policy
"color,translation,cutout": rand_brightness adds a per-image offset in [-0.5, 0.5),
rand_saturation scales each pixel's deviation from its channel mean by a factor in [0, 2),
rand_contrast scales the deviation from the image mean by a factor in [0.5, 1.5),
rand_translation shifts by up to 1/8 of the size with zero padding, rand_cutout zeroes a square
of half the size at a random centre; BigGAN.py G_D.forward: G(z) under
torch.set_grad_enabled(train_G), fakes and reals concatenated and passed through DiffAugment
before D; train_fns.py GAN_training_function: both optimizers cleared at the top of train(), the
D step on G's fakes made without grad and augmented reals, the G step on augmented fakes with
grad; losses.py: the hinge losses, relu(1 - D(T(x))) + relu(1 + D(T(G(z)))) for D and
-D(T(G(z))) for G). Here one D step per iteration, no class conditioning, no EMA, no toggle_grads
and no second clearing of G's gradients before the G step (train() clears them once more, "for
safety"); the augmentation is written anew, with the reference's ranges, on 3 x 8 x 8 images.
The data: only 64 real images, each a coloured 3 x 3 square at a random place on black.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=2e-4)
parser.add_argument("--out", default=None, help="where to save the generator and discriminator")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_real, size, z_dim = 64, 8, 16

# the small data set: a coloured 3 x 3 square on black, in [-1, 1]
real_images = -torch.ones(n_real, 3, size, size)
for i in range(n_real):
    top, left = torch.randint(0, size - 2, (2,)).tolist()
    colour = torch.rand(3, 1, 1) * 2 - 1
    real_images[i, :, top:top + 3, left:left + 3] = colour


def diff_augment(x):
    """Colour, translation and cutout, each drawn per image, differentiable in x."""
    b, c = x.shape[:2]
    x = x + (torch.rand(b, 1, 1, 1) - 0.5)
    channel_mean = x.mean(1, keepdim=True)
    x = (x - channel_mean) * (torch.rand(b, 1, 1, 1) * 2) + channel_mean
    image_mean = x.mean((1, 2, 3), keepdim=True)
    x = (x - image_mean) * (torch.rand(b, 1, 1, 1) + 0.5) + image_mean
    # translation: read the zero-padded image at a shifted grid
    shift = size // 8
    offset = torch.randint(-shift, shift + 1, (2, b, 1))
    grid = torch.arange(size) + shift
    rows = (grid + offset[0]).view(b, 1, size, 1)
    cols = (grid + offset[1]).view(b, 1, 1, size)
    padded = F.pad(x, [shift, shift, shift, shift])
    x = padded[torch.arange(b).view(b, 1, 1, 1), torch.arange(c).view(1, c, 1, 1), rows, cols]
    # cutout: zero a square of half the size around a random centre
    half = size // 2
    centre = torch.randint(0, size, (2, b, 1))
    from_corner = torch.arange(size) - centre + half // 2
    inside = (from_corner >= 0) & (from_corner < half)
    mask = ~(inside[0].unsqueeze(2) & inside[1].unsqueeze(1))
    return x * mask.unsqueeze(1).float()


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 128), nn.ReLU(), nn.Linear(128, 3 * size * size))

    def forward(self, z):
        return torch.tanh(self.net(z)).view(-1, 3, size, size)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.Flatten(), nn.Linear(32 * (size // 2) ** 2, 1))

    def forward(self, x):
        return self.net(x).squeeze(1)


generator, discriminator = Generator(), Discriminator()
g_optimizer = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.0, 0.999))
d_optimizer = torch.optim.Adam(discriminator.parameters(), lr=2 * args.lr, betas=(0.0, 0.999))
for step in range(args.steps):
    g_optimizer.zero_grad()
    d_optimizer.zero_grad()
    # discriminator step: G's fakes without grad, fakes and reals augmented together
    real = real_images[torch.randint(0, n_real, (args.batch_size,))]
    fake = generator(torch.randn(args.batch_size, z_dim)).detach()
    d_out = discriminator(diff_augment(torch.cat([fake, real])))
    d_fake, d_real = d_out.split([args.batch_size, args.batch_size])
    d_loss = F.relu(1 - d_real).mean() + F.relu(1 + d_fake).mean()
    d_loss.backward()
    d_optimizer.step()
    # generator step: the gradient flows back through the augmentation into G(z)
    fake = generator(torch.randn(args.batch_size, z_dim))
    fake_aug = diff_augment(fake)
    g_loss = -discriminator(fake_aug).mean()
    g_loss.backward()
    g_optimizer.step()
    if step % 25 == 0:
        print(f"step {step} d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f}")

if args.out:
    torch.save({"generator": generator.state_dict(), "discriminator": discriminator.state_dict()},
               args.out)
