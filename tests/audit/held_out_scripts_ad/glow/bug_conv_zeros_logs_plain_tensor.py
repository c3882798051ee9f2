"""Glow, a multi-scale flow of actnorm, invertible 1x1 convolutions and affine couplings.

Paper: Diederik P. Kingma and Prafulla Dhariwal, "Glow: Generative Flow with Invertible 1x1
Convolutions", arXiv:1807.03039, NeurIPS 2018.
Reference implementation: openai/glow, model.py (model._f_loss: n_bits_x preprocessing, uniform
dequantisation and the -log(n_bins) per dimension term, bits per dimension; revnet2d_step:
actnorm, invertible_1x1_conv, affine coupling with scale = sigmoid(h + 2); f: conv, ReLU, 1x1
conv, ReLU, conv2d_zeros; split2d / split2d_prior; prior with learntop; abstract_model_xy: the
data-dependent initialisation pass over a batch of init data before training), tfops.py
(actnorm, conv2d with actnorm, conv2d_zeros with logscale_factor 3), train.py (linear learning
rate warm-up); and the PyTorch port y0ast/Glow-PyTorch, modules.py (_ActNorm with
initialize_parameters under torch.no_grad(), InvertibleConv1x1, Conv2d, Conv2dZeros, Split2d,
squeeze2d), model.py (FlowStep, FlowNet, Glow.prior with learn_top) and train.py (Adam with
weight decay 5e-5, LambdaLR warm-up, the init handler that runs the model once on
n_init_batches under torch.no_grad() after the optimizer is built).

The data are 8x8 one-channel images of a Gaussian bump at a random place and width plus a little
noise, quantised to 5 bits; each batch is mapped to [-0.5, 0.5) and dequantised with uniform
noise of one bin. The flow squeezes to 4x4x4, runs K flow steps, splits off half the channels
(scored by a learned conditional Gaussian from a zero-initialised convolution of the kept half),
squeezes to 2x2x8, runs K more steps and scores the rest under a learned top prior (a
zero-initialised convolution of a zero buffer). A flow step is actnorm (per-channel bias and log
scale, log-det H W sum(logs)), an invertible 1x1 convolution initialised to a random rotation
(log-det H W log|det W|, taken in float64 as the reference does) and an affine coupling whose
network is a 3x3 conv and a 1x1 conv, each followed by actnorm and ReLU, and a zero-initialised
3x3 conv; the coupling adds the shift and multiplies by sigmoid(h + 2). Every actnorm, also those
inside the coupling networks, is initialised from the data by one forward pass over an init
batch under torch.no_grad(), which copies the per-channel mean and inverse standard deviation
into the existing parameters. One Adam optimizer (weight decay 5e-5) holds every parameter; the
learning rate warms up linearly; each step runs zero_grad, the negative log-likelihood in bits
per dimension, backward and the step; the held-out bits per dimension are computed under
torch.no_grad().
Bug: Conv2dZeros makes its log scale self.logs as a plain tensor instead of an nn.Parameter,
so the output scales of the coupling networks' last layers, the split priors and the learned
top prior are never registered, never in the optimizer and stay at exp(0) = 1.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_train", type=int, default=512)
parser.add_argument("--n_test", type=int, default=128)
parser.add_argument("--img_size", type=int, default=8)
parser.add_argument("--n_bits", type=int, default=5)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--K", type=int, default=2)
parser.add_argument("--L", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--n_init", type=int, default=64)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--weight_decay", type=float, default=5e-5)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_bins = 2.0 ** args.n_bits


def make_images(n, size):
    coords = torch.arange(size, dtype=torch.float32)
    cy = torch.rand(n, 1, 1) * (size - 1)
    cx = torch.rand(n, 1, 1) * (size - 1)
    width = 1.0 + 1.5 * torch.rand(n, 1, 1)
    d2 = (coords.view(1, -1, 1) - cy) ** 2 + (coords.view(1, 1, -1) - cx) ** 2
    img = torch.exp(-d2 / (2 * width ** 2)) + 0.05 * torch.rand(n, size, size)
    levels = torch.floor(img.clamp(0.0, 0.999) * n_bins)
    return levels.unsqueeze(1)


def preprocess(levels):
    x = levels / n_bins - 0.5
    return x + torch.rand_like(x) / n_bins


def squeeze2d(x):
    b, c, h, w = x.shape
    x = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(b, c * 4, h // 2, w // 2)


def gaussian_log_p(mean, logs, x):
    return -0.5 * (2.0 * logs + (x - mean) ** 2 * torch.exp(-2.0 * logs) + math.log(2 * math.pi))


class ActNorm(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.logs = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.register_buffer("initialized", torch.tensor(False))

    def initialize(self, x):
        with torch.no_grad():
            mean = x.mean(dim=(0, 2, 3), keepdim=True)
            std = ((x - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True).sqrt()
            self.bias.copy_(-mean)
            self.logs.copy_(torch.log(1.0 / (std + 1e-6)))
            self.initialized.fill_(True)

    def forward(self, x):
        if not self.initialized:
            self.initialize(x)
        y = (x + self.bias) * torch.exp(self.logs)
        return y, self.logs.sum() * x.shape[2] * x.shape[3]


class InvConv1x1(nn.Module):
    def __init__(self, channels):
        super().__init__()
        w_init = torch.linalg.qr(torch.randn(channels, channels))[0]
        self.weight = nn.Parameter(w_init)

    def forward(self, x):
        c = self.weight.shape[0]
        dlogdet = torch.slogdet(self.weight.double())[1].float() * x.shape[2] * x.shape[3]
        return F.conv2d(x, self.weight.view(c, c, 1, 1)), dlogdet


class ConvActNorm(nn.Module):
    def __init__(self, n_in, n_out, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(n_in, n_out, kernel_size, padding=kernel_size // 2, bias=False)
        nn.init.normal_(self.conv.weight, 0.0, 0.05)
        self.actnorm = ActNorm(n_out)

    def forward(self, x):
        return self.actnorm(self.conv(x))[0]


class Conv2dZeros(nn.Module):
    def __init__(self, n_in, n_out, logscale_factor=3.0):
        super().__init__()
        self.conv = nn.Conv2d(n_in, n_out, 3, padding=1)
        nn.init.zeros_(self.conv.weight)
        nn.init.zeros_(self.conv.bias)
        self.logscale_factor = logscale_factor
        self.logs = torch.zeros(1, n_out, 1, 1)

    def forward(self, x):
        return self.conv(x) * torch.exp(self.logs * self.logscale_factor)


class AffineCoupling(nn.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        self.net = nn.Sequential(
            ConvActNorm(channels // 2, hidden, 3), nn.ReLU(),
            ConvActNorm(hidden, hidden, 1), nn.ReLU(),
            Conv2dZeros(hidden, channels),
        )

    def forward(self, x):
        z1, z2 = x.chunk(2, 1)
        h = self.net(z1)
        shift = h[:, 0::2]
        scale = torch.sigmoid(h[:, 1::2] + 2.0)
        z2 = (z2 + shift) * scale
        return torch.cat([z1, z2], 1), torch.log(scale).flatten(1).sum(1)


class FlowStep(nn.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        self.actnorm = ActNorm(channels)
        self.invconv = InvConv1x1(channels)
        self.coupling = AffineCoupling(channels, hidden)

    def forward(self, x):
        x, ld_actnorm = self.actnorm(x)
        x, ld_invconv = self.invconv(x)
        x, ld_coupling = self.coupling(x)
        return x, ld_actnorm + ld_invconv + ld_coupling


class Split2d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.prior = Conv2dZeros(channels // 2, channels)

    def forward(self, x):
        z1, z2 = x.chunk(2, 1)
        h = self.prior(z1)
        log_p = gaussian_log_p(h[:, 0::2], h[:, 1::2], z2).flatten(1).sum(1)
        return z1, log_p


class Glow(nn.Module):
    def __init__(self, in_channels, img_size, hidden, K, L):
        super().__init__()
        self.levels = nn.ModuleList()
        self.splits = nn.ModuleList()
        c, s = in_channels, img_size
        for i in range(L):
            c, s = c * 4, s // 2
            self.levels.append(nn.ModuleList([FlowStep(c, hidden) for _ in range(K)]))
            if i < L - 1:
                self.splits.append(Split2d(c))
                c = c // 2
        self.register_buffer("prior_h", torch.zeros(1, 2 * c, s, s))
        self.learn_top = Conv2dZeros(2 * c, 2 * c)

    def forward(self, x):
        objective = torch.zeros(x.shape[0])
        z = x
        for i, steps in enumerate(self.levels):
            z = squeeze2d(z)
            for step in steps:
                z, dlogdet = step(z)
                objective = objective + dlogdet
            if i < len(self.splits):
                z, log_p = self.splits[i](z)
                objective = objective + log_p
        h = self.learn_top(self.prior_h)
        objective = objective + gaussian_log_p(h[:, 0::2], h[:, 1::2], z).flatten(1).sum(1)
        return z, objective


def bits_per_dim(model, levels):
    x = preprocess(levels)
    n_dims = x[0].numel()
    _, objective = model(x)
    objective = objective - math.log(n_bins) * n_dims
    return (-objective / (math.log(2.0) * n_dims)).mean()


train_levels = make_images(args.n_train, args.img_size)
test_levels = make_images(args.n_test, args.img_size)
model = Glow(1, args.img_size, args.hidden, args.K, args.L)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: min(1.0, (step + 1) / args.warmup))

# data-dependent initialisation of every actnorm
model.train()
with torch.no_grad():
    init_bpd = bits_per_dim(model, train_levels[:args.n_init])
print(f"after init bpd {init_bpd.item():.4f}")

for step in range(args.steps):
    i = (step * args.batch_size) % args.n_train
    batch = train_levels[i:i + args.batch_size]
    optimizer.zero_grad()
    loss = bits_per_dim(model, batch)
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 10 == 0 or step == args.steps - 1:
        print(f"step {step:3d} bpd {loss.item():.4f}")

model.eval()
with torch.no_grad():
    test_bpd = bits_per_dim(model, test_levels)
print(f"test bpd {test_bpd.item():.4f}")

if args.out:
    # Conv2dZeros' log scales apart: a twin that keeps them as plain tensors saves them too
    zeros = {n: m for n, m in model.named_modules() if isinstance(m, Conv2dZeros)}
    torch.save({"model": {k: v for k, v in model.state_dict().items()
                          if k.rpartition(".")[::2] not in {(n, "logs") for n in zeros}},
                "zeros_logs": {n: m.logs.detach().clone() for n, m in zeros.items()}}, args.out)
