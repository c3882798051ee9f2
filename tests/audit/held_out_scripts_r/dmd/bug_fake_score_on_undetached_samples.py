"""Distribution matching distillation (DMD) of a diffusion model into a one-step generator at a
tiny size, written after Yin, Gharbi, Zhang, Shechtman, Durand, Freeman and Park, "One-step
Diffusion with Distribution Matching Distillation" (CVPR 2024, arXiv:2311.18828), and its sequel
Yin et al., "Improved Distribution Matching Distillation for Fast Image Synthesis" (DMD2,
NeurIPS 2024, arXiv:2405.14867): a one-step generator G(z) is trained so that the diffused
distribution of its samples matches that of the data, the gradient of the KL divergence being
estimated as the difference of two denoisers' outputs at the noised sample: that of the frozen
"real" score network (the pretrained diffusion model) and that of a "fake" score network trained
at the same time, by the ordinary denoising loss, on the generator's detached samples. Two
phases: the real score network is first trained on 2-D data as an EDM diffusion model (log-normal
sigma, EDM weighting), then distilled. With tianweiy/DMD2 (https://github.com/tianweiy/DMD2;
main/edm/edm_guidance.py EDMGuidance: real_unet frozen with requires_grad_(False), fake_unet a
deepcopy of it made trainable, Karras sigmas with the small ones first;
compute_distribution_matching_loss: under torch.no_grad() a sigma index drawn between 2% and 98%
of the schedule, the generator's sample noised, both networks' denoised predictions, p_real =
x - pred_real, p_fake = x - pred_fake, grad = (p_real - p_fake) / mean|p_real|, nan_to_num, and
the loss 0.5 * mse(x, (x - grad).detach()); compute_loss_fake: the generator's samples detached
("no gradient to generator"), noised at a uniformly drawn Karras sigma, the fake network's x0
regression weighted by 1/sigma^2 + 1/sigma_data^2; edm_unified_model.py EDMUniModel: the
generator a deepcopy of the fake network, run at conditioning_sigma = sigma_max on noise scaled by
it; train_edm.py Trainer.train_one_step: the generator's DM step every dfake_gen_update_ratio
iterations, then the fake network's step, each AdamW optimizer (weight decay 0.01) cleared right
after its step). The score networks are EDM-preconditioned MLPs on the plane and sigma_max is 10
rather than 80; the fake network's step uses a fresh batch of the generator's samples; DMD2's GAN
classifier, DMD's regression loss, gradient-norm clipping and the reference's extra clearing of
the generator's gradients at the very end of each iteration are left out. The data: four
Gaussian blobs.
Bug: the fake score network's denoising loss is computed on the generator's samples with their
graph, fake_x = generate(args.batch_size), where DMD2's compute_loss_fake detaches them first
("latents = latents.detach() # no gradient to generator"): the fake network's backward also runs
into the generator and leaves in its .grad the gradient of the fake network's denoising loss,
which the generator's optimizer, cleared only right after its own step, adds to the next
distribution matching gradient, so from the second generator update on the generator is also
trained to make samples that the fake network denoises well, a term that has nothing to do with
the real distribution, accumulated over dfake_gen_update_ratio guidance steps."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--real-steps", type=int, default=200, help="phase 1: diffusion training")
parser.add_argument("--steps", type=int, default=100, help="phase 2: distillation iterations")
parser.add_argument("--dfake-gen-update-ratio", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--generator-lr", type=float, default=1e-3)
parser.add_argument("--guidance-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the three networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_sigmas, sigma_min, sigma_max, rho, sigma_data, hidden = 100, 0.002, 10.0, 7.0, 0.5, 64
ramp = torch.linspace(0, 1, n_sigmas)
karras_sigmas = (sigma_max ** (1 / rho) + ramp * (sigma_min ** (1 / rho)
                                                  - sigma_max ** (1 / rho))) ** rho
karras_sigmas = karras_sigmas.flip(0)  # small sigma first
min_step, max_step = int(0.02 * n_sigmas), int(0.98 * n_sigmas)
centres = torch.tensor([[0.6, 0.6], [-0.6, 0.6], [-0.6, -0.6], [0.6, -0.6]])


def sample_data(n):
    return centres[torch.randint(0, 4, (n,))] + 0.1 * torch.randn(n, 2)


class Denoiser(nn.Module):
    """EDM-preconditioned x0-prediction D(x_sigma, sigma) on the plane."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 + 8, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 2))
        self.register_buffer("freqs", torch.linspace(1.0, 8.0, 4))

    def forward(self, x, sigma):
        c_skip = sigma_data ** 2 / (sigma ** 2 + sigma_data ** 2)
        c_out = sigma * sigma_data / (sigma ** 2 + sigma_data ** 2).sqrt()
        c_in = 1 / (sigma ** 2 + sigma_data ** 2).sqrt()
        phase = sigma.log() / 4 * self.freqs
        h = self.net(torch.cat([c_in * x, phase.sin(), phase.cos()], 1))
        return c_skip * x + c_out * h


def denoising_loss(net, x0):
    """compute_loss_fake: the weighted x0-regression at a uniformly drawn Karras sigma."""
    sigma = karras_sigmas[torch.randint(0, n_sigmas, (x0.shape[0], 1))]
    noisy = x0 + sigma * torch.randn_like(x0)
    weight = sigma ** -2 + 1 / sigma_data ** 2
    return (weight * (net(noisy, sigma) - x0).pow(2)).mean()


def generate(n):
    """One step of the generator from pure noise at the conditioning sigma."""
    sigma = torch.full((n, 1), sigma_max)
    return generator(sigma_max * torch.randn(n, 2), sigma)


# phase 1: the real score network, trained on the data as an EDM diffusion model
real_score = Denoiser()
real_optimizer = torch.optim.AdamW(real_score.parameters(), lr=1e-2, weight_decay=0.01)
for step in range(args.real_steps):
    x0 = sample_data(args.batch_size)
    sigma = (torch.randn(args.batch_size, 1) * 1.2 - 1.2).exp()
    noisy = x0 + sigma * torch.randn_like(x0)
    weight = sigma ** -2 + 1 / sigma_data ** 2
    real_loss = (weight * (real_score(noisy, sigma) - x0).pow(2)).mean()
    real_optimizer.zero_grad()
    real_loss.backward()
    real_optimizer.step()
    if step % 100 == 0:
        print(f"real {step} loss {real_loss.item():.4f}")

# phase 2: distribution matching distillation into a one-step generator
real_score.requires_grad_(False)
fake_score = copy.deepcopy(real_score)
fake_score.requires_grad_(True)
generator = copy.deepcopy(fake_score)
generator.requires_grad_(True)
gen_optimizer = torch.optim.AdamW(generator.parameters(), lr=args.generator_lr,
                                  weight_decay=0.01)
fake_optimizer = torch.optim.AdamW(fake_score.parameters(), lr=args.guidance_lr,
                                   weight_decay=0.01)
for step in range(args.steps):
    if step % args.dfake_gen_update_ratio == 0:
        # generator turn: the distribution matching gradient, injected through a detached target
        x = generate(args.batch_size)
        sigma = karras_sigmas[torch.randint(min_step, max_step + 1, (args.batch_size, 1))]
        with torch.no_grad():
            noisy = x + sigma * torch.randn_like(x)
            pred_real = real_score(noisy, sigma)
            pred_fake = fake_score(noisy, sigma)
            p_real = x - pred_real
            p_fake = x - pred_fake
            dm_grad = torch.nan_to_num((p_real - p_fake) / p_real.abs().mean(1, keepdim=True))
        target = (x - dm_grad).detach()
        dm_loss = 0.5 * F.mse_loss(x, target)
        dm_loss.backward()
        gen_optimizer.step()
        gen_optimizer.zero_grad()
    # guidance turn: the fake score network's denoising loss on the generator's samples
    fake_x = generate(args.batch_size)
    fake_loss = denoising_loss(fake_score, fake_x)
    fake_loss.backward()
    fake_optimizer.step()
    fake_optimizer.zero_grad()
    if step % 20 == 0:
        with torch.no_grad():
            gap = torch.cdist(generate(512), centres).min(1).values.mean().item()
        print(f"dmd {step} fake loss {fake_loss.item():.4f} distance to nearest blob {gap:.3f}")

if args.out:
    torch.save({"real_score": real_score.state_dict(), "fake_score": fake_score.state_dict(),
                "generator": generator.state_dict()}, args.out)
