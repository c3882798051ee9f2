"""A GAN whose discriminator is spectrally normalised by hand, at a tiny size, written after
Miyato, Kataoka, Koyama and Yoshida, "Spectral Normalization for Generative Adversarial
Networks" (ICLR 2018, arXiv:1802.05957), section 2.2 and algorithm 1 (one power iteration per
update, the vector u kept between updates, W_SN = W / sigma(W) with sigma(W) = u^T W v), with
christiancosgrove/pytorch-spectral-normalization-gan
(https://github.com/christiancosgrove/pytorch-spectral-normalization-gan,
spectral_normalization.py SpectralNorm._update_u_v, which runs the power iteration on w.data and
takes sigma = u.dot(w.view(height, -1).mv(v)) with the graph of w only; main.py, the hinge loss
and the discriminator's and generator's Adam) and PyTorch's own
torch/nn/utils/spectral_norm.py (SpectralNorm.compute_weight: the power iteration under
torch.no_grad(), u and v kept as buffers, sigma = torch.dot(u, torch.mv(weight_mat, v)) outside
it). Each linear layer of the discriminator holds weight_bar as its parameter and u, v as
buffers; every forward runs one power iteration without gradient, keeps the new u and v, and
divides weight_bar by sigma, which carries the gradient of weight_bar. The discriminator takes
n_dis hinge-loss steps per generator step. Eight Gaussians on a ring, made in the script.
Injected bug: sigma = torch.dot(u, w @ v) is computed inside the torch.no_grad() block of the
power iteration, so W / sigma treats sigma as a constant and the discriminator's gradient
loses the term through sigma(W)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--n-dis", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--z-dim", type=int, default=4)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--power-iterations", type=int, default=1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden_dim = 32
angles = torch.arange(8) * torch.pi / 4
centers = 2 * torch.stack([angles.cos(), angles.sin()], 1)


def sample_real(n):
    return centers[torch.randint(0, 8, (n,))] + 0.05 * torch.randn(n, 2)


class SNLinear(nn.Module):
    """A linear layer with W_SN = W / sigma(W), sigma estimated by power iteration."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight_bar = nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.register_buffer("u", F.normalize(torch.randn(n_out), dim=0))
        self.register_buffer("v", F.normalize(torch.randn(n_in), dim=0))

    def forward(self, x):
        w = self.weight_bar.flatten(1)
        u, v = self.u, self.v
        with torch.no_grad():
            for _ in range(args.power_iterations):
                v = F.normalize(w.t() @ u, dim=0)
                u = F.normalize(w @ v, dim=0)
            sigma = torch.dot(u, w @ v)
        self.u, self.v = u, v
        return F.linear(x, self.weight_bar / sigma, self.bias)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([SNLinear(2, hidden_dim), SNLinear(hidden_dim, hidden_dim),
                                     SNLinear(hidden_dim, 1)])

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.leaky_relu(layer(x), 0.1)
        return self.layers[-1](x).squeeze(1)


generator = nn.Sequential(nn.Linear(args.z_dim, hidden_dim), nn.ReLU(),
                          nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                          nn.Linear(hidden_dim, 2))
discriminator = Discriminator()
optim_gen = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.0, 0.9))
optim_disc = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.0, 0.9))

for it in range(args.iters):
    for _ in range(args.n_dis):
        real = sample_real(args.batch_size)
        z = torch.randn(args.batch_size, args.z_dim)
        optim_disc.zero_grad()
        disc_loss = (F.relu(1.0 - discriminator(real)).mean()
                     + F.relu(1.0 + discriminator(generator(z).detach())).mean())
        disc_loss.backward()
        optim_disc.step()
    z = torch.randn(args.batch_size, args.z_dim)
    optim_gen.zero_grad()
    gen_loss = -discriminator(generator(z)).mean()
    gen_loss.backward()
    optim_gen.step()
    print(f"iter {it} disc {disc_loss.item():.4f} gen {gen_loss.item():.4f}")

with torch.no_grad():
    sigmas = [torch.linalg.matrix_norm(layer.weight_bar / torch.dot(layer.u, layer.weight_bar
                                                                  @ layer.v), ord=2)
              for layer in discriminator.layers]
print("spectral norms of W_SN:", " ".join(f"{s:.4f}" for s in sigmas))

if args.out:
    torch.save({"generator": generator.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
