"""Score distillation sampling (SDS) at a tiny size, written after Poole, Jain, Barron and
Mildenhall, "DreamFusion: Text-to-3D using 2D Diffusion" (arXiv:2209.14988, 2022; ICLR 2023),
section 3: a differentiable generator x = g(theta) is optimised so that its outputs look like
samples of a pretrained, frozen diffusion model, by noising x to x_t = sqrt(abar_t) x +
sqrt(1 - abar_t) eps at a random t, asking the frozen denoiser for its noise estimate
eps_hat(x_t, t), and following the SDS gradient w(t) (eps_hat - eps) dx/dtheta, which leaves out
the denoiser's Jacobian d eps_hat / d x_t. Two phases: first the denoiser is trained on 2-D data
by the DDPM noise-prediction loss, then it is frozen and the generator is trained by SDS alone.
With ashawkey/stable-dreamfusion (https://github.com/ashawkey/stable-dreamfusion,
guidance/sd_utils.py StableDiffusion.train_step: t drawn uniformly between min_step and max_step,
2% and 98% of the training timesteps; noise, the noisy latents and the U-Net's noise prediction
made under torch.no_grad(); w = 1 - alphas_cumprod[t]; grad = grad_scale * w * (noise_pred -
noise), passed through torch.nan_to_num; the gradient injected into the latents, which still
carry the rendering's graph; nerf/utils.py Trainer.train_one_epoch clears the optimizer's
gradients before each train_step and its backward). The injection is written as in tianweiy/DMD2
(main/edm/edm_guidance.py EDMGuidance.compute_distribution_matching_loss, "following
stable-dreamfusion"): a squared error 0.5 * ||x - target||^2 against the detached target
(x - grad).detach(), whose gradient in x is grad. Here the frozen denoiser (requires_grad_(False))
runs with autograd on and the one cut that SDS needs is that detached target. Classifier-free
guidance and the text prompt are left out (the denoiser is unconditional), and a small MLP from a
random code to a point on the plane stands in for the NeRF rendered from random cameras. The
data: three Gaussian blobs off the origin.
Bug: the SDS target is written target = x.detach() - sds_grad, detaching the generator's sample
but not the score term, where the target must be detached whole, (x - sds_grad).detach() (DMD2's
compute_distribution_matching_loss detaches the whole target, and stable-dreamfusion's train_step
makes the noise prediction under torch.no_grad()): sds_grad = w(t) (eps_hat - eps) keeps its graph
through the frozen denoiser back to x_t and x, so the generator's backward, besides the SDS
gradient, also runs through the denoiser's Jacobian d eps_hat / d x_t, the very term that score
distillation drops, and the generator is pushed to shrink the denoiser's residual rather than to
follow the score."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--denoiser-steps", type=int, default=200, help="phase 1: DDPM training")
parser.add_argument("--sds-steps", type=int, default=100, help="phase 2: SDS steps")
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--grad-scale", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the denoiser and the generator")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_timesteps, code_dim, hidden = 100, 4, 64
betas = torch.linspace(1e-3, 0.08, n_timesteps)
alphas_cumprod = torch.cumprod(1 - betas, 0)
min_step, max_step = int(0.02 * n_timesteps), int(0.98 * n_timesteps)


centres = torch.tensor([[1.5, 1.0], [2.5, 2.0], [1.0, 2.5]])


def sample_data(n):
    """Three Gaussian blobs off the origin, where the generator starts."""
    return centres[torch.randint(0, 3, (n,))] + 0.2 * torch.randn(n, 2)


class Denoiser(nn.Module):
    """eps_hat(x_t, t): the noise in x_t, from x_t and a sinusoidal embedding of t."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 + 8, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 2))
        self.register_buffer("freqs", torch.exp(torch.linspace(0, math.log(50.0), 4)))

    def forward(self, x_t, t):
        phase = (t.float() / n_timesteps).unsqueeze(1) * self.freqs
        return self.net(torch.cat([x_t, phase.sin(), phase.cos()], 1))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(code_dim, 32), nn.SiLU(), nn.Linear(32, 32), nn.SiLU(),
                                 nn.Linear(32, 2))

    def forward(self, code):
        return self.net(code)


denoiser = Denoiser()

# phase 1: the diffusion model, trained on the data by the DDPM noise-prediction loss
den_optimizer = torch.optim.Adam(denoiser.parameters(), lr=2e-3)
for step in range(args.denoiser_steps):
    x0 = sample_data(args.batch_size)
    t = torch.randint(0, n_timesteps, (args.batch_size,))
    noise = torch.randn_like(x0)
    abar = alphas_cumprod[t].unsqueeze(1)
    x_t = abar.sqrt() * x0 + (1 - abar).sqrt() * noise
    den_loss = (denoiser(x_t, t) - noise).pow(2).mean()
    den_optimizer.zero_grad()
    den_loss.backward()
    den_optimizer.step()
    if step % 100 == 0:
        print(f"denoiser {step} loss {den_loss.item():.4f}")

# phase 2: the denoiser frozen, the generator trained by score distillation
denoiser.requires_grad_(False)
generator = Generator()
gen_optimizer = torch.optim.Adam(generator.parameters(), lr=5e-3)
for step in range(args.sds_steps):
    x = generator(torch.randn(args.batch_size, code_dim))
    t = torch.randint(min_step, max_step + 1, (args.batch_size,))
    noise = torch.randn_like(x)
    abar = alphas_cumprod[t].unsqueeze(1)
    x_t = abar.sqrt() * x + (1 - abar).sqrt() * noise
    eps_hat = denoiser(x_t, t)
    w = 1 - abar
    sds_grad = torch.nan_to_num(args.grad_scale * w * (eps_hat - noise))
    target = x.detach() - sds_grad
    sds_loss = 0.5 * (x - target).pow(2).sum(1).mean()
    gen_optimizer.zero_grad()
    sds_loss.backward()
    gen_optimizer.step()
    if step % 25 == 0:
        gap = torch.cdist(x.detach(), centres).min(1).values.mean().item()
        print(f"sds {step} loss {sds_loss.item():.4f} distance to nearest blob {gap:.3f}")

if args.out:
    torch.save({"denoiser": denoiser.state_dict(), "generator": generator.state_dict()}, args.out)
