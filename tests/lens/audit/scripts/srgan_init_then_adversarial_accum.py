"""SRGAN in two phases with gradient accumulation, at a tiny size, written after Ledig et al.,
"Photo-Realistic Single Image Super-Resolution Using a Generative Adversarial Network" (CVPR
2017, arXiv:1609.04802) and tensorlayer/SRGAN (train.py, ``train``: first the generator alone
is initialised on the pixel-wise MSE with its own optimizer, ``g_optimizer_init``, for
``n_epoch_init`` epochs; then the adversarial phase with two more optimizers, ``g_optimizer``
for the generator on MSE plus ``1e-3`` times the adversarial loss (the VGG feature loss is
left out here), and ``d_optimizer`` for the discriminator on real high-resolution patches
against generated ones). In the adversarial phase each batch's super-resolved signal
``fake_hr = G(lr)`` is made once; the discriminator's loss reads ``fake_hr.detach()`` and comes
first, and the generator's loss reads ``fake_hr`` through the discriminator (its parameters set
not to require grad) after the discriminator's step of that batch. Both networks accumulate
over ``--accum`` batches (2 at the defaults) and step under ``if (i + 1) % accum == 0:``,
``zero_grad()`` after each step. 1-d signals of 16 samples (sums of random sinusoids made in
the script), their low-resolution versions averaged over pairs; 6 initialisation batches, 12
adversarial batches. ``--out PATH`` saves both networks' state_dicts."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--init-iters", type=int, default=6)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--length", type=int, default=16)
parser.add_argument("--channels", type=int, default=8)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

grid = torch.linspace(0, 1, args.length)


def batch():
    freq = 1 + 3 * torch.rand(args.batch_size, 2, 1)
    phase = 2 * math.pi * torch.rand(args.batch_size, 2, 1)
    hr = torch.sin(2 * math.pi * freq * grid + phase).sum(1, keepdim=True) / 2
    lr = F.avg_pool1d(hr, 2)
    return lr, hr


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv1d(1, args.channels, 3, padding=1)
        self.body = nn.Conv1d(args.channels, args.channels, 3, padding=1)
        self.upsample = nn.Conv1d(args.channels, 2, 3, padding=1)

    def forward(self, lr):
        h = F.relu(self.head(lr))
        h = h + F.relu(self.body(h))
        out = self.upsample(h)
        return out.transpose(1, 2).reshape(lr.shape[0], 1, -1)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, args.channels, 3, stride=2, padding=1)
        self.fc = nn.Linear(args.channels * args.length // 2, 1)

    def forward(self, hr):
        return self.fc(F.leaky_relu(self.conv(hr), 0.2).flatten(1))


G, D = Generator(), Discriminator()
g_optimizer_init = torch.optim.Adam(G.parameters(), lr=args.lr)
g_optimizer = torch.optim.Adam(G.parameters(), lr=args.lr)
d_optimizer = torch.optim.Adam(D.parameters(), lr=args.lr)


def bce(logits, value):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, value))


# initialise learning (G)
for step in range(args.init_iters):
    lr, hr = batch()
    mse = F.mse_loss(G(lr), hr)
    mse.backward()
    g_optimizer_init.step()
    g_optimizer_init.zero_grad()
    print(f"init {step}: mse {mse.item():.4f}")

# adversarial learning (G, D)
for i in range(args.iters):
    lr, hr = batch()
    fake_hr = G(lr)

    d_loss = bce(D(hr), 1.0) + bce(D(fake_hr.detach()), 0.0)
    (d_loss / args.accum).backward()
    if (i + 1) % args.accum == 0:
        d_optimizer.step()
        d_optimizer.zero_grad()

    for p in D.parameters():
        p.requires_grad = False
    g_loss = F.mse_loss(fake_hr, hr) + 1e-3 * bce(D(fake_hr), 1.0)
    (g_loss / args.accum).backward()
    for p in D.parameters():
        p.requires_grad = True
    if (i + 1) % args.accum == 0:
        g_optimizer.step()
        g_optimizer.zero_grad()
        print(f"[{i + 1}/{args.iters}] d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")

if args.out:
    torch.save({"G": G.state_dict(), "D": D.state_dict()}, args.out)
