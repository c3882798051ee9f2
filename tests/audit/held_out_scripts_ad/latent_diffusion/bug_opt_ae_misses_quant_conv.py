"""Latent diffusion model (LDM): a KL-regularised autoencoder trained first, then a
class-conditional denoiser trained on its frozen, rescaled latents.

Paper: Robin Rombach, Andreas Blattmann, Dominik Lorenz, Patrick Esser and Bjorn Ommer,
"High-Resolution Image Synthesis with Latent Diffusion Models", CVPR 2022, arXiv:2112.10752.
Reference implementation: CompVis/latent-diffusion, ldm/models/autoencoder.py (AutoencoderKL:
encoder -> quant_conv -> DiagonalGaussianDistribution, posterior.sample(), post_quant_conv ->
decoder; configure_optimizers: opt_ae = Adam(betas=(0.5, 0.9)) over the encoder, decoder,
quant_conv and post_quant_conv parameters), ldm/modules/losses/contperceptual.py
(LPIPSWithDiscriminator: reconstruction NLL summed and divided by the batch size, plus
kl_weight * KL; the discriminator factor is 0 before disc_start),
ldm/modules/distributions/distributions.py (DiagonalGaussianDistribution: sample, kl),
ldm/models/diffusion/ddpm.py (DDPM.register_schedule with the "linear" schedule, q_sample,
p_losses with the eps target and the l2 loss; LatentDiffusion.instantiate_first_stage: eval,
disabled train, requires_grad False; instantiate_cond_stage with cond_stage_trainable;
on_train_batch_start with scale_by_std: scale_factor = 1 / std of the first batch's latents;
get_input under torch.no_grad: encode_first_stage, get_first_stage_encoding(...).detach();
configure_optimizers: AdamW over self.model plus the cond_stage_model when
cond_stage_trainable; on_train_batch_end: model_ema(self.model)), ldm/modules/ema.py (LitEma:
shadow buffers, decay min(decay, (1 + n) / (10 + n)), shadow -= (1 - decay) * (shadow - param)
under no_grad) and ldm/modules/encoders/modules.py (ClassEmbedder: nn.Embedding of the label).

The data are 16x16 one-channel images in [-1, 1], each a Gaussian blob whose quadrant is set by
one of four classes. Phase 1 trains the first stage alone: a small convolutional encoder (two
stride-2 convolutions, f = 4) whose double_z output goes through quant_conv to the mean and
log-variance of a diagonal Gaussian over a 3x4x4 latent, a reparameterised sample, then
post_quant_conv and the decoder; the loss is the L1 reconstruction summed per image plus a
1e-6-weighted KL, one Adam (betas 0.5, 0.9) over the four parts. The LPIPS term (it needs a
pre-trained VGG) and the patch discriminator (off before disc_start = 50001 in the reference
configs) are left out. Phase 2 builds the LatentDiffusion model: the autoencoder is put in eval
mode and frozen, the latents are taken under torch.no_grad() and scaled by 1 / their std on the
first batch, a trainable ClassEmbedder gives the conditioning, and a small residual denoiser
with a sinusoidal timestep embedding (the class embedding projected and added to it, instead of
the reference's cross-attention on one token) predicts the noise of q_sample over 1000 linear
betas (0.0015 to 0.0195). One AdamW holds the denoiser and the class embedder; an EMA of the
denoiser is updated after every step.
Bug: quant_conv is left out of opt_ae, so the 1x1 convolution that maps the encoder output to
the posterior's mean and log-variance gets gradients but never trains.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--ae_steps", type=int, default=40)
parser.add_argument("--ldm_steps", type=int, default=40)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--ch", type=int, default=16)
parser.add_argument("--z_channels", type=int, default=3)
parser.add_argument("--embed_dim", type=int, default=3)
parser.add_argument("--model_ch", type=int, default=32)
parser.add_argument("--context_dim", type=int, default=16)
parser.add_argument("--timesteps", type=int, default=1000)
parser.add_argument("--ae_lr", type=float, default=1e-3)
parser.add_argument("--kl_weight", type=float, default=1e-6)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--ema_decay", type=float, default=0.9999)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_CLASSES = 4
SIZE = 16


def make_images(labels):
    n = labels.shape[0]
    centers = torch.tensor([[4.0, 4.0], [4.0, 11.0], [11.0, 4.0], [11.0, 11.0]])
    c = centers[labels] + 0.7 * torch.randn(n, 2)
    grid = torch.arange(SIZE, dtype=torch.float32)
    dy = (grid.view(1, SIZE, 1) - c[:, 0].view(n, 1, 1)) ** 2
    dx = (grid.view(1, 1, SIZE) - c[:, 1].view(n, 1, 1)) ** 2
    blob = torch.exp(-(dx + dy) / 8.0)
    x = 2.0 * blob - 1.0 + 0.05 * torch.randn(n, SIZE, SIZE)
    return x.clamp(-1.0, 1.0).unsqueeze(1)


class DiagonalGaussianDistribution:
    def __init__(self, moments):
        self.mean, logvar = torch.chunk(moments, 2, dim=1)
        self.logvar = torch.clamp(logvar, -30.0, 20.0)
        self.std = torch.exp(0.5 * self.logvar)
        self.var = torch.exp(self.logvar)

    def sample(self):
        return self.mean + self.std * torch.randn_like(self.mean)

    def mode(self):
        return self.mean

    def kl(self):
        return 0.5 * torch.sum(self.mean ** 2 + self.var - 1.0 - self.logvar, dim=[1, 2, 3])


class Encoder(nn.Module):
    def __init__(self, ch, z_channels):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.SiLU(),
            nn.Conv2d(ch, ch, 4, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(ch, 2 * ch, 4, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(2 * ch, 2 * z_channels, 3, padding=1),
        )

    def forward(self, x):
        return self.net(x)


class Decoder(nn.Module):
    def __init__(self, ch, z_channels):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(z_channels, 2 * ch, 3, padding=1), nn.SiLU(),
            nn.Upsample(scale_factor=2, mode="nearest"),
            nn.Conv2d(2 * ch, ch, 3, padding=1), nn.SiLU(),
            nn.Upsample(scale_factor=2, mode="nearest"),
            nn.Conv2d(ch, ch, 3, padding=1), nn.SiLU(),
            nn.Conv2d(ch, 1, 3, padding=1),
        )

    def forward(self, z):
        return self.net(z)


class AutoencoderKL(nn.Module):
    def __init__(self, ch, z_channels, embed_dim):
        super().__init__()
        self.encoder = Encoder(ch, z_channels)
        self.decoder = Decoder(ch, z_channels)
        self.quant_conv = nn.Conv2d(2 * z_channels, 2 * embed_dim, 1)
        self.post_quant_conv = nn.Conv2d(embed_dim, z_channels, 1)

    def encode(self, x):
        moments = self.quant_conv(self.encoder(x))
        return DiagonalGaussianDistribution(moments)

    def decode(self, z):
        return self.decoder(self.post_quant_conv(z))

    def forward(self, x, sample_posterior=True):
        posterior = self.encode(x)
        z = posterior.sample() if sample_posterior else posterior.mode()
        return self.decode(z), posterior


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args_ = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args_), torch.sin(args_)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, ch, emb_dim):
        super().__init__()
        self.in_layers = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(),
                                       nn.Conv2d(ch, ch, 3, padding=1))
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_dim, ch))
        self.out_layers = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(),
                                        nn.Conv2d(ch, ch, 3, padding=1))

    def forward(self, x, emb):
        h = self.in_layers(x)
        h = h + self.emb_layers(emb)[:, :, None, None]
        return x + self.out_layers(h)


class Denoiser(nn.Module):
    def __init__(self, in_ch, ch, context_dim):
        super().__init__()
        self.ch = ch
        self.time_embed = nn.Sequential(nn.Linear(ch, 4 * ch), nn.SiLU(), nn.Linear(4 * ch, 4 * ch))
        self.context_proj = nn.Linear(context_dim, 4 * ch)
        self.conv_in = nn.Conv2d(in_ch, ch, 3, padding=1)
        self.block1 = ResBlock(ch, 4 * ch)
        self.block2 = ResBlock(ch, 4 * ch)
        self.out = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, in_ch, 3, padding=1))

    def forward(self, x, t, context):
        emb = self.time_embed(timestep_embedding(t, self.ch)) + self.context_proj(context)
        h = self.conv_in(x)
        h = self.block2(self.block1(h, emb), emb)
        return self.out(h)


class ClassEmbedder(nn.Module):
    def __init__(self, embed_dim, n_classes):
        super().__init__()
        self.embedding = nn.Embedding(n_classes, embed_dim)

    def forward(self, labels):
        return self.embedding(labels)


class LitEma(nn.Module):
    def __init__(self, model, decay):
        super().__init__()
        self.decay = decay
        self.register_buffer("num_updates", torch.tensor(0, dtype=torch.int))
        self.m_name2s_name = {}
        for name, p in model.named_parameters():
            s_name = name.replace(".", "")
            self.m_name2s_name[name] = s_name
            self.register_buffer(s_name, p.detach().clone())

    @torch.no_grad()
    def forward(self, model):
        self.num_updates += 1
        n = self.num_updates.item()
        decay = min(self.decay, (1 + n) / (10 + n))
        for name, p in model.named_parameters():
            shadow = getattr(self, self.m_name2s_name[name])
            shadow.sub_((1.0 - decay) * (shadow - p))


def make_beta_schedule(n_timestep, linear_start=0.0015, linear_end=0.0195):
    return torch.linspace(linear_start ** 0.5, linear_end ** 0.5, n_timestep,
                          dtype=torch.float64) ** 2


class LatentDiffusion(nn.Module):
    def __init__(self, first_stage_model, z_channels, model_ch, context_dim, timesteps):
        super().__init__()
        self.model = Denoiser(z_channels, model_ch, context_dim)
        self.first_stage_model = first_stage_model.eval()
        self.first_stage_model.requires_grad_(False)
        self.cond_stage_model = ClassEmbedder(context_dim, N_CLASSES)
        self.num_timesteps = timesteps
        alphas_cumprod = torch.cumprod(1.0 - make_beta_schedule(timesteps), dim=0)
        self.register_buffer("sqrt_alphas_cumprod", alphas_cumprod.sqrt().float())
        self.register_buffer("sqrt_one_minus_alphas_cumprod", (1.0 - alphas_cumprod).sqrt().float())
        self.register_buffer("scale_factor", torch.tensor(1.0))

    @torch.no_grad()
    def get_input(self, x):
        encoder_posterior = self.first_stage_model.encode(x)
        z = self.scale_factor * encoder_posterior.sample()
        return z.detach()

    def q_sample(self, x_start, t, noise):
        a = self.sqrt_alphas_cumprod[t].view(-1, 1, 1, 1)
        s = self.sqrt_one_minus_alphas_cumprod[t].view(-1, 1, 1, 1)
        return a * x_start + s * noise

    def p_losses(self, x_start, cond, t):
        noise = torch.randn_like(x_start)
        x_noisy = self.q_sample(x_start, t, noise)
        model_out = self.model(x_noisy, t, cond)
        loss = F.mse_loss(model_out, noise, reduction="none").mean(dim=[1, 2, 3])
        return loss.mean()

    def forward(self, z, labels):
        t = torch.randint(0, self.num_timesteps, (z.shape[0],))
        c = self.cond_stage_model(labels)
        return self.p_losses(z, c, t)


# Phase 1: the first stage (AutoencoderKL) alone.
ae = AutoencoderKL(args.ch, args.z_channels, args.embed_dim)
opt_ae = torch.optim.Adam(list(ae.encoder.parameters())
                          + list(ae.decoder.parameters())
                          + list(ae.post_quant_conv.parameters()),
                          lr=args.ae_lr, betas=(0.5, 0.9))

ae.train()
for step in range(args.ae_steps):
    labels = torch.randint(0, N_CLASSES, (args.batch_size,))
    x = make_images(labels)
    reconstructions, posterior = ae(x)
    rec_loss = torch.abs(x - reconstructions)
    nll_loss = torch.sum(rec_loss) / rec_loss.shape[0]
    kl_loss = posterior.kl()
    kl_loss = torch.sum(kl_loss) / kl_loss.shape[0]
    aeloss = nll_loss + args.kl_weight * kl_loss
    opt_ae.zero_grad()
    aeloss.backward()
    opt_ae.step()
    if step % 10 == 0 or step == args.ae_steps - 1:
        print(f"ae step {step:3d} nll {nll_loss.item():.3f} kl {kl_loss.item():.2f}")

# Phase 2: the denoiser on the frozen first stage's latents.
ldm = LatentDiffusion(ae, args.z_channels, args.model_ch, args.context_dim, args.timesteps)
model_ema = LitEma(ldm.model, args.ema_decay)
params = list(ldm.model.parameters()) + list(ldm.cond_stage_model.parameters())
opt = torch.optim.AdamW(params, lr=args.lr)

labels = torch.randint(0, N_CLASSES, (args.batch_size,))
with torch.no_grad():
    z = ldm.get_input(make_images(labels))
    ldm.scale_factor.fill_(1.0 / z.flatten().std())
print(f"scale_factor {ldm.scale_factor.item():.4f}")

ldm.model.train()
ldm.cond_stage_model.train()
for step in range(args.ldm_steps):
    labels = torch.randint(0, N_CLASSES, (args.batch_size,))
    z = ldm.get_input(make_images(labels))
    loss = ldm(z, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model_ema(ldm.model)
    if step % 10 == 0 or step == args.ldm_steps - 1:
        print(f"ldm step {step:3d} loss {loss.item():.4f}")

eval_labels = torch.arange(64) % N_CLASSES
with torch.no_grad():
    eval_loss = ldm(ldm.get_input(make_images(eval_labels)), eval_labels)
print(f"eval loss {eval_loss.item():.4f}")

if args.out:
    torch.save({
        "first_stage_model": ae.state_dict(),
        "model": ldm.model.state_dict(),
        "cond_stage_model": ldm.cond_stage_model.state_dict(),
        "model_ema": model_ema.state_dict(),
        "scale_factor": ldm.scale_factor,
    }, args.out)
