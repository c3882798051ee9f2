"""Deep Image Prior: blind denoising of one noisy image by fitting a randomly initialised net.

Paper: Dmitry Ulyanov, Andrea Vedaldi and Victor Lempitsky, "Deep Image Prior", CVPR 2018
(arXiv:1711.10925, 2017).
Reference implementation: DmitryUlyanov/deep-image-prior, denoising.ipynb (the F16 setup:
get_net(input_depth, 'skip', pad='reflection', skip_n33d, skip_n33u, skip_n11, num_scales,
upsample_mode='bilinear'); get_noise(input_depth, 'noise', ...) uniform noise scaled by 1/10 and
detached; net_input_saved and noise cloned from it; closure: net_input = net_input_saved +
noise.normal_() * reg_noise_std, out = net(net_input), the exponential moving average out_avg of
out.detach() with exp_weight 0.99, MSE to the noisy image, backward, and the backtracking that
copies the saved parameters last_net back into the net when the PSNR to the noisy image falls by
more than 5 dB, else saves a fresh last_net), models/skip.py (skip: per scale a strided 3x3
conv, BN, LeakyReLU, 3x3 conv, BN, LeakyReLU down the deeper branch, a 1x1 skip conv with BN and
LeakyReLU, concatenation, BN, 3x3 conv, BN, LeakyReLU, 1x1 conv, BN, LeakyReLU, bilinear
upsampling, and a final 1x1 conv with a sigmoid), utils/common_utils.py (get_params with
OPT_OVER='net', optimize: Adam at LR 0.01 with zero_grad, closure, step per iteration) and
utils/denoising_utils.py (get_noisy_image: Gaussian noise of sigma 25/255, clipped to [0, 1]).

The clean image is synthetic (a smooth colour gradient, a disc and a bar, 32x32, 3 channels);
the noisy image adds Gaussian noise of sigma 25/255. The skip net has three scales of 16
channels and 4 skip channels; its input z is 8 channels of uniform noise times 1/10, saved
once (net_input_saved) and perturbed each iteration by fresh Gaussian noise of std 1/30
(reg_noise_std) drawn in place into `noise`, a buffer cloned apart from the saved input, so z
itself never changes. Only the network is optimised (OPT_OVER = 'net'), by one Adam. Each
iteration: zero_grad, forward, the EMA of the detached outputs, the MSE to the noisy image,
backward, the PSNR to the noisy image and the backtracking check (a fall-back copies a cloned
parameter snapshot into the net under no_grad), and the Adam step. The denoised result is
out_avg.
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
parser.add_argument("--num_iter", type=int, default=60)
parser.add_argument("--size", type=int, default=32)
parser.add_argument("--input_depth", type=int, default=8)
parser.add_argument("--channels", type=int, default=16)
parser.add_argument("--skip_channels", type=int, default=4)
parser.add_argument("--num_scales", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--sigma", type=float, default=25.0)
parser.add_argument("--reg_noise_std", type=float, default=1.0 / 30.0)
parser.add_argument("--exp_weight", type=float, default=0.99)
parser.add_argument("--show_every", type=int, default=100)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_image(size):
    ys, xs = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size),
                            indexing="ij")
    img = torch.stack([0.2 + 0.6 * xs, 0.3 + 0.4 * ys, 0.5 - 0.3 * xs * ys])
    disc = ((xs - 0.35) ** 2 + (ys - 0.4) ** 2) < 0.05
    img[:, disc] = torch.tensor([0.9, 0.2, 0.1]).unsqueeze(1)
    bar = (xs > 0.65) & (xs < 0.8) & (ys > 0.15)
    img[:, bar] = torch.tensor([0.1, 0.1, 0.8]).unsqueeze(1)
    return img.unsqueeze(0)


def psnr(a, b):
    return 10.0 * math.log10(1.0 / F.mse_loss(a, b).item())


def conv(n_in, n_out, k, stride=1):
    layers = []
    if k > 1:
        layers.append(nn.ReflectionPad2d((k - 1) // 2))
    layers.append(nn.Conv2d(n_in, n_out, k, stride=stride))
    return nn.Sequential(*layers)


def conv_bn_act(n_in, n_out, k, stride=1):
    return nn.Sequential(conv(n_in, n_out, k, stride), nn.BatchNorm2d(n_out),
                         nn.LeakyReLU(0.2))


class SkipLevel(nn.Module):
    """One scale of the skip net: a skip branch and a deeper branch, concatenated."""

    def __init__(self, n_in, n_down, n_up, n_skip, inner=None, inner_out=None):
        super().__init__()
        self.skip = conv_bn_act(n_in, n_skip, 1)
        self.down = nn.Sequential(conv_bn_act(n_in, n_down, 3, stride=2),
                                  conv_bn_act(n_down, n_down, 3))
        self.inner = inner
        k = n_down if inner is None else inner_out
        self.bn_cat = nn.BatchNorm2d(n_skip + k)
        self.up = nn.Sequential(conv_bn_act(n_skip + k, n_up, 3), conv_bn_act(n_up, n_up, 1))

    def forward(self, x):
        deeper = self.down(x)
        if self.inner is not None:
            deeper = self.inner(deeper)
        deeper = F.interpolate(deeper, scale_factor=2, mode="bilinear", align_corners=False)
        y = torch.cat([self.skip(x), deeper], 1)
        return self.up(self.bn_cat(y))


class SkipNet(nn.Module):
    def __init__(self, n_in, n_out, channels, skip_channels, num_scales):
        super().__init__()
        level = None
        for i in reversed(range(num_scales)):
            level_in = n_in if i == 0 else channels
            level = SkipLevel(level_in, channels, channels, skip_channels, level,
                              None if level is None else channels)
        self.body = level
        self.head = nn.Conv2d(channels, n_out, 1)

    def forward(self, z):
        return torch.sigmoid(self.head(self.body(z)))


img = make_image(args.size)
img_noisy = (img + torch.randn_like(img) * args.sigma / 255.0).clamp(0, 1)

net = SkipNet(args.input_depth, 3, args.channels, args.skip_channels, args.num_scales)
net_input = (torch.rand(1, args.input_depth, args.size, args.size) * 0.1).detach()
net_input_saved = net_input.detach().clone()
noise = net_input_saved.detach().clone()

optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
mse = nn.MSELoss()

out_avg = None
last_net = None
psnr_noisy_last = 0.0
i = 0
for it in range(args.num_iter):
    optimizer.zero_grad()
    if args.reg_noise_std > 0:
        net_input = net_input_saved + noise.normal_() * args.reg_noise_std
    out = net(net_input)
    if out_avg is None:
        out_avg = out.detach()
    else:
        out_avg = out_avg * args.exp_weight + out.detach() * (1 - args.exp_weight)
    total_loss = mse(out, img_noisy)
    total_loss.backward()

    psnr_noisy = psnr(out.detach(), img_noisy)
    psnr_gt_sm = psnr(out_avg, img)
    if i % args.show_every and psnr_noisy - psnr_noisy_last < -5:
        print(f"iter {it:3d} falling back to previous checkpoint")
        with torch.no_grad():
            for new_param, net_param in zip(last_net, net.parameters()):
                net_param.copy_(new_param)
    else:
        if i % args.show_every:
            last_net = [p.detach().clone() for p in net.parameters()]
            psnr_noisy_last = psnr_noisy
        i += 1
    optimizer.step()
    if it % 15 == 0 or it == args.num_iter - 1:
        print(f"iter {it:3d} loss {total_loss.item():.5f} psnr_noisy {psnr_noisy:.2f} "
              f"psnr_gt_sm {psnr_gt_sm:.2f}")

if args.out:
    torch.save({"net": net.state_dict(), "net_input_saved": net_input_saved,
                "out_avg": out_avg}, args.out)
