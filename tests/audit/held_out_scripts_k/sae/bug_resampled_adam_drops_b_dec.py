"""A sparse autoencoder on a model's activations at a tiny size, written after Bricken et al.,
"Towards Monosemanticity: Decomposing Language Models With Dictionary Learning" (Anthropic,
Transformer Circuits Thread, 2023), the appendix on the autoencoder (a ReLU encoder applied to x -
b_dec, a linear decoder whose columns are the dictionary's directions, the squared reconstruction
error plus an L1 penalty on the latents, the decoder's columns held at unit norm, and the resampling
of dead latents: a latent that has not fired for a while gets as its decoder column an input drawn
with probability proportional to its squared reconstruction loss, minus b_dec and normalised, as its
encoder row the same direction scaled to 0.2 times the mean norm of the live latents' encoder rows,
a zero encoder bias and reset Adam moments), and after the public training code of
openai/sparse_autoencoder (https://github.com/openai/sparse_autoencoder,
sparse_autoencoder/train.py: unit_norm_decoder_, which divides the decoder's columns by their norms
in place on the data, unit_norm_decoder_grad_adjustment_, which projects out of the decoder's
gradient its component parallel to each column before the optimizer's step, and training_loop_ with
one Adam over ae.parameters(); FastAutoencoder with its pre_bias, a tied initialisation and the
statistics of steps since each latent last fired). Two phases: plain training, then, from a step on,
dead latents resampled at intervals, each resampling followed by a fresh Adam over the autoencoder's
parameters, which drops every moment (the paper resets the resampled latents' moments only). The
activations are those of a frozen random two-layer 'model' built in the script, fed sparse
combinations of ground-truth directions, and read under torch.no_grad(). Injected bug: the fresh
Adam built after each resampling to drop the moments is given the resampled parameters only,
torch.optim.Adam([sae.W_enc, sae.b_enc, sae.W_dec]), for torch.optim.Adam(sae.parameters())
(openai/sparse_autoencoder's training_loop_ steps one Adam over ae.parameters(), pre_bias included,
and the paper resets the moments of the resampled latents without dropping any parameter from the
optimizer), so from the first resampling on the decoder bias b_dec, which the reconstruction and,
through x - b_dec, the encoder still differentiate, gets a gradient at every backward but is never
stepped again; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=90)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--n-latents", type=int, default=48)
parser.add_argument("--l1-coef", type=float, default=0.15)
parser.add_argument("--resample-start", type=int, default=30, help="first resampling step")
parser.add_argument("--resample-every", type=int, default=25)
parser.add_argument("--dead-after", type=int, default=10, help="steps without firing")
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

d_in, d_model, n_features = 8, 16, 24
feature_dirs = torch.randn(n_features, d_in)
model = nn.Sequential(nn.Linear(d_in, d_model), nn.GELU(), nn.Linear(d_model, d_model))
model.requires_grad_(False)


def get_activations(n):
    """The frozen model's activations on sparse combinations of ground-truth directions."""
    coefficients = (torch.rand(n, n_features) < 0.1).float() * torch.rand(n, n_features)
    with torch.no_grad():
        return model(coefficients @ feature_dirs)


class SparseAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.W_dec = nn.Parameter(torch.randn(d_model, args.n_latents))
        self.W_enc = nn.Parameter(self.W_dec.detach().t().clone())
        self.b_enc = nn.Parameter(torch.zeros(args.n_latents))
        self.b_dec = nn.Parameter(get_activations(512).mean(0))

    def forward(self, x):
        f = F.relu((x - self.b_dec) @ self.W_enc.t() + self.b_enc)
        return f, f @ self.W_dec.t() + self.b_dec


@torch.no_grad()
def unit_norm_decoder_(sae):
    sae.W_dec /= sae.W_dec.norm(dim=0, keepdim=True)


@torch.no_grad()
def remove_parallel_grad_(sae):
    w, g = sae.W_dec, sae.W_dec.grad
    g -= (w * g).sum(0, keepdim=True) * w


@torch.no_grad()
def resample_dead_latents_(sae, dead):
    x = get_activations(256)
    losses = (x - sae(x)[1]).pow(2).sum(-1)
    picked = x[torch.multinomial(losses.pow(2), int(dead.sum()))]
    directions = F.normalize(picked - sae.b_dec, dim=-1)
    live_norm = sae.W_enc[~dead].norm(dim=-1).mean()
    sae.W_dec[:, dead] = directions.t()
    sae.W_enc[dead] = 0.2 * live_norm * directions
    sae.b_enc[dead] = 0.0


sae = SparseAutoencoder()
unit_norm_decoder_(sae)
with torch.no_grad():
    sae.W_enc.copy_(sae.W_dec.t())
optimizer = torch.optim.Adam(sae.parameters(), lr=args.lr)
steps_since_fired = torch.zeros(args.n_latents)
for step in range(args.steps):
    if step >= args.resample_start and (step - args.resample_start) % args.resample_every == 0:
        # phase 2: resample the latents that have not fired lately, then reset Adam
        dead = steps_since_fired >= args.dead_after
        if dead.any():
            resample_dead_latents_(sae, dead)
            optimizer = torch.optim.Adam([sae.W_enc, sae.b_enc, sae.W_dec], lr=args.lr)
            steps_since_fired[dead] = 0
        print(f"step {step} resampled {int(dead.sum())} dead latents")
    x = get_activations(args.batch_size)
    f, x_hat = sae(x)
    mse = (x_hat - x).pow(2).sum(-1).mean()
    loss = mse + args.l1_coef * f.abs().sum(-1).mean()
    optimizer.zero_grad()
    loss.backward()
    remove_parallel_grad_(sae)
    optimizer.step()
    unit_norm_decoder_(sae)
    steps_since_fired += 1
    steps_since_fired[(f > 0).any(0)] = 0
    if step % 15 == 0:
        print(f"step {step} mse {mse.item():.4f} l0 {(f > 0).float().sum(-1).mean().item():.2f}")

if args.out:
    torch.save({"sae": sae.state_dict()}, args.out)
