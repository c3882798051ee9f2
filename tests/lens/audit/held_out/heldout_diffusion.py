"""Diffusion models: improved consistency training (a consistency model trained against its own
output at the neighbouring noise level) and latent diffusion (a denoiser trained on the latents
of a fixed autoencoder).

The text is ours, at tiny sizes; the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- openai/consistency_models cm/karras_diffusion.py@3d86141c2d04ec08de45c7e9a9a0cc19ba9bba34
# (KarrasDenoiser.consistency_losses): x_t = x + t z and x_{t'} = x + t' z share the noise z;
# the online model denoises x_t, the target denoiser (here, as in improved consistency
# training, the same network) denoises x_{t'} under torch.no_grad() and is detached; the
# distance is the pseudo-Huber sqrt(|a - b|^2 + c^2) - c (arXiv:2310.14189).
ICT = "openai/consistency_models cm/karras_diffusion.py@3d86141c2d04ec08de45c7e9a9a0cc19ba9bba34"
ICT_URL = ("https://github.com/openai/consistency_models/blob/3d86141c2d04ec08de45c7e9a9a0cc19ba9"
           "bba34/cm/karras_diffusion.py")


class Denoiser(nn.Module):
    """c_skip(t) x + c_out(t) F(x, t): the boundary condition f(x, sigma_min) = x."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, 16), nn.SiLU(), nn.Linear(16, dim))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        sigma_data, sigma_min = 0.5, 0.002
        c_skip = sigma_data ** 2 / ((t - sigma_min) ** 2 + sigma_data ** 2)
        c_out = (t - sigma_min) * sigma_data / (t ** 2 + sigma_data ** 2).sqrt()
        return c_skip * x + c_out * self.net(torch.cat([x, t.log() / 4], dim=1))


# The bug: the target x_{t'} is denoised with its graph, so the pseudo-Huber distance trains
# both sides (truth "targets").
def consistency_training(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    dim = 4
    model = Denoiser(dim)
    optimizer = torch.optim.RAdam(model.parameters(), lr=1e-4)
    sigmas = torch.tensor([0.002, 0.1, 0.4, 1.0, 2.5, 80.0])
    c = 0.00054 * dim ** 0.5

    def step() -> torch.Tensor:
        x = torch.randn(6, dim, generator=gen)
        z = torch.randn(6, dim, generator=gen)
        n = torch.randint(0, len(sigmas) - 1, (6,), generator=gen)
        t, t_next = sigmas[n + 1][:, None], sigmas[n][:, None]
        distiller = model(x + t * z, t)
        if bug:
            target = model(x + t_next * z, t_next)
        else:
            with torch.no_grad():
                target = model(x + t_next * z, t_next).detach()
        diff = (distiller - target).pow(2).sum(dim=1)
        weight = 1.0 / (t - t_next).squeeze(1)
        return (weight * ((diff + c ** 2).sqrt() - c)).mean()

    return RealCase("consistency_target_grad" if bug else "consistency_training", ICT, ICT_URL,
                    "targets" if bug else "correct", step, optimizer, {"model": model})


# --- huggingface/diffusers examples/text_to_image/train_text_to_image.py@024c4376fb19caa85275c
# 038f071b6e1446a5cad: vae.requires_grad_(False) and text_encoder.requires_grad_(False) before
# training; latents = vae.encode(pixels).latent_dist.sample() * scaling_factor; noise added at
# a random timestep; the UNet predicts the noise from the latents and the text embedding; MSE.
LDM = ("huggingface/diffusers examples/text_to_image/train_text_to_image.py@"
       "024c4376fb19caa85275c038f071b6e1446a5cad")
LDM_URL = ("https://github.com/huggingface/diffusers/blob/024c4376fb19caa85275c038f071b6e1446a5ca"
           "d/examples/text_to_image/train_text_to_image.py")


class Encoder(nn.Module):
    """A VAE encoder: mean and log-variance of a diagonal Gaussian latent."""

    def __init__(self, pixels: int, latent: int) -> None:
        super().__init__()
        self.moments = nn.Linear(pixels, 2 * latent)

    def forward(self, x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        mean, logvar = self.moments(x).chunk(2, dim=1)
        return mean + (0.5 * logvar).exp() * noise


# The bug: the frozen parts are left trainable (requires_grad_(False) omitted): the noise
# prediction loss backpropagates into the VAE encoder and the text encoder, which the UNet's
# optimizer does not step (truth "leaks").
def latent_diffusion(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    pixels, latent, tokens = 8, 3, 6
    vae = Encoder(pixels, latent)
    text_encoder = nn.Embedding(tokens, 4)
    unet = nn.Sequential(nn.Linear(latent + 4 + 1, 12), nn.SiLU(), nn.Linear(12, latent))
    if not bug:
        vae.requires_grad_(False)
        text_encoder.requires_grad_(False)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
    betas = torch.linspace(1e-4, 0.02, 50)
    alphas_cumprod = torch.cumprod(1 - betas, dim=0)

    def step() -> torch.Tensor:
        images = torch.rand(4, pixels, generator=gen)
        ids = torch.randint(0, tokens, (4, 3), generator=gen)
        latents = vae(images, torch.randn(4, latent, generator=gen)) * 0.18215
        noise = torch.randn(4, latent, generator=gen)
        timesteps = torch.randint(0, 50, (4,), generator=gen)
        a = alphas_cumprod[timesteps][:, None]
        noisy = a.sqrt() * latents + (1 - a).sqrt() * noise
        hidden = text_encoder(ids).mean(dim=1)
        pred = unet(torch.cat([noisy, hidden, timesteps[:, None] / 50], dim=1))
        return F.mse_loss(pred.float(), noise.float())

    return RealCase("latent_diffusion_vae_grad" if bug else "latent_diffusion", LDM, LDM_URL,
                    "leaks" if bug else "correct", step, optimizer,
                    {"vae": vae, "text_encoder": text_encoder, "unet": unet})


CASES = {"consistency_training": consistency_training,
         "consistency_target_grad": lambda seed: consistency_training(seed, bug=True),
         "latent_diffusion": latent_diffusion,
         "latent_diffusion_vae_grad": lambda seed: latent_diffusion(seed, bug=True)}
TWINS = {"consistency_target_grad": "consistency_training",
         "latent_diffusion_vae_grad": "latent_diffusion"}
FIELD = "diffusion models"
