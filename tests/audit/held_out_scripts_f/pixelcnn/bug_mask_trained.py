"""PixelCNN at a tiny size, written after van den Oord, Kalchbrenner and Kavukcuoglu, "Pixel
Recurrent Neural Networks" (ICML 2016, arXiv:1601.06759), section 3.5 (masked convolutions, masks A
and B), with the network of jzbontar/pixelcnn-pytorch (https://github.com/jzbontar/pixelcnn-pytorch,
main.py MaskedConv2d): each masked convolution keeps its mask as a buffer (a fixed tensor of ones
and zeros that hides the current pixel, for mask A, and the pixels after it) and convolves with the
kernel multiplied by the mask (the reference multiplies the kernel's data by the mask in place), so
every output pixel depends only on the pixels before it; a 1x1 convolution gives a distribution over
the intensity levels of each pixel, trained by cross-entropy on the image itself. Small images of
bars and blobs quantised to a few levels, made in the script. Injected bug: the mask is registered
as an nn.Parameter instead of a buffer, so the optimizer, built from the network's parameters,
trains it with the kernels: its zeros move off zero and the convolutions see the pixels they must
not."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, levels, fm = 8, 4, 12


def images(n):
    rows = torch.arange(size).view(1, size, 1).float()
    cols = torch.arange(size).view(1, 1, size).float()
    centre = torch.randint(2, size - 2, (n, 2, 1, 1)).float()
    blob = torch.exp(-((rows - centre[:, 0]) ** 2 + (cols - centre[:, 1]) ** 2) / 4.0)
    bars = (cols.long() % torch.randint(2, 4, (n, 1, 1)) == 0).float() * 0.5
    x = (blob + bars).clamp(0, 1)
    return (x * (levels - 1)).round().long().unsqueeze(1)  # (batch, 1, size, size) levels


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert mask_type in {"A", "B"}
        _, _, kH, kW = self.weight.size()
        mask = torch.ones_like(self.weight)
        mask[:, :, kH // 2, kW // 2 + (mask_type == "B"):] = 0
        mask[:, :, kH // 2 + 1:] = 0
        self.mask = nn.Parameter(mask)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, self.stride, self.padding)


net = nn.Sequential(
    MaskedConv2d("A", 1, fm, 5, 1, 2, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d("B", fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    nn.Conv2d(fm, levels, 1))
optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
for step in range(args.steps):
    target = images(args.batch_size)
    x = target.float() / (levels - 1)
    loss = F.cross_entropy(net(x), target.squeeze(1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} negative log-likelihood {loss.item():.4f} nats per pixel")

if args.out:
    torch.save(net.state_dict(), args.out)
