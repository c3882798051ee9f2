"""A denoising diffusion model with self-conditioning at a tiny size, written after Ho, Jain and
Abbeel, "Denoising Diffusion Probabilistic Models" (arXiv:2006.11239), the self-conditioning of
Chen, Zhang and Hinton, "Analog Bits" (arXiv:2208.04202), and ``GaussianDiffusion.p_losses`` of
lucidrains/denoising-diffusion-pytorch (https://github.com/lucidrains/denoising-diffusion-pytorch/
blob/main/denoising_diffusion_pytorch/denoising_diffusion_pytorch.py): the noise-prediction loss
at a random step of a linear beta schedule, and, half of the time (``random() < 0.5``), a first
estimate of ``x_0`` made under ``torch.no_grad()`` and fed to the model as its condition, zeros
otherwise. An MLP on points in the plane (a ring, made in the script). As published: clean."""

import argparse
import math
import random

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=30)
parser.add_argument("--timesteps", type=int, default=50)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
torch.manual_seed(args.seed)

angles = torch.rand(args.iterations, 64) * 2 * math.pi
data = torch.stack((angles.cos(), angles.sin()), -1) + 0.05 * torch.randn(args.iterations, 64, 2)

betas = torch.linspace(1e-4, 0.2, args.timesteps)
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
sqrt_alphas_cumprod = alphas_cumprod.sqrt()
sqrt_one_minus_alphas_cumprod = (1.0 - alphas_cumprod).sqrt()


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.time_mlp = nn.Sequential(nn.Linear(1, 16), nn.SiLU())
        self.net = nn.Sequential(nn.Linear(2 + 2 + 16, 64), nn.SiLU(), nn.Linear(64, 2))

    def forward(self, x, t, x_self_cond):
        emb = self.time_mlp(t[:, None].float() / args.timesteps)
        return self.net(torch.cat((x, x_self_cond, emb), -1))


def predict_start_from_noise(x_t, t, noise):
    return (x_t - sqrt_one_minus_alphas_cumprod[t, None] * noise) / sqrt_alphas_cumprod[t, None]


model = Denoiser()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
for iteration in range(args.iterations):
    x_start = data[iteration]
    t = torch.randint(0, args.timesteps, (x_start.shape[0],))
    noise = torch.randn_like(x_start)
    x = sqrt_alphas_cumprod[t, None] * x_start + sqrt_one_minus_alphas_cumprod[t, None] * noise
    x_self_cond = torch.zeros_like(x_start)
    if random.random() < 0.5:
        with torch.no_grad():
            x_self_cond = predict_start_from_noise(x, t, model(x, t, x_self_cond))
    model_out = model(x, t, x_self_cond)
    loss = F.mse_loss(model_out, noise)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if iteration % 10 == 0:
        print(f"iteration {iteration} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
