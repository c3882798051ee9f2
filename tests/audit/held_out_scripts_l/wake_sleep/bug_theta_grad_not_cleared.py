"""The wake-sleep algorithm for a Helmholtz machine at a tiny size, written after Hinton, Dayan,
Frey and Neal, "The 'wake-sleep' algorithm for unsupervised neural networks" (Science 268,
1158-1161, 1995): in the wake phase the recognition connections drive the units bottom-up and
the generative connections learn to reconstruct each layer from the states sampled above it,
with the sampled states held as fixed targets; in the sleep phase the generative connections
dream a fantasy top-down and the recognition connections learn to recover the states that made
it. Written with pyro-ppl/pyro (https://github.com/pyro-ppl/pyro, pyro/infer/rws.py:
ReweightedWakeSleep._get_trace, which runs the model against the guide's samples through
get_importance_trace(..., detach=True); _loss, whose sleep-phi term detaches the model's trace,
_model_trace.detach_(), before the guide scores it; loss_and_grads, which backpropagates
(wake_theta_loss + phi_loss) once) and tuananhle7/rrws (https://github.com/tuananhle7/rrws,
code/gmm/losses.py get_wake_theta_loss and get_sleep_loss; code/gmm/train.py train_wake_sleep,
an Adam for the generative model, optimizer_theta, and one for the inference network,
optimizer_phi, both cleared before every backward). The machine has two stochastic hidden layers;
they are Gaussian here, sampled by reparameterisation, so a sample keeps a path back to the
recognition weights (Hinton's binary units have none) and the wake phase must cut it. Data: 4x4
images of horizontal or vertical bars with flipped pixels (after the paper's bars), made in the
script. Injected bug: the clear of the generative model's Adam,
optimizer_theta.zero_grad(), is left out before the backward (rrws's train_wake_sleep clears
optimizer_theta and optimizer_phi before every backward), so only the recognition net's
gradients are cleared: from the second update the generative net is stepped on the sum of the
wake-phase gradients of every batch so far, while the recognition net trains on its own
sleep-phase gradient of each batch."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--theta-lr", type=float, default=1e-2)
parser.add_argument("--phi-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

side, hidden_dim, top_dim = 4, 6, 2
n_pixels = side * side


def make_bars(n):
    """Each image: all-vertical or all-horizontal bars, each bar on with p = 0.3, 5% flipped."""
    bars = (torch.rand(n, side) < 0.3).float()
    vertical = bars[:, None, :].expand(n, side, side)
    horizontal = bars[:, :, None].expand(n, side, side)
    images = torch.where(torch.rand(n, 1, 1) < 0.5, vertical, horizontal).reshape(n, n_pixels)
    flip = (torch.rand(n, n_pixels) < 0.05).float()
    return (images + flip) % 2


data = make_bars(512)


def gaussian_log_prob(z, mean, log_std):
    return (-0.5 * ((z - mean) / log_std.exp()) ** 2 - log_std
            - 0.5 * math.log(2 * math.pi)).sum(-1)


def sample(mean, log_std):
    return mean + log_std.exp() * torch.randn_like(mean)


class Generative(nn.Module):
    """p(h2) p(h1 | h2) p(x | h1): top-down connections, the top layer's own biases."""

    def __init__(self):
        super().__init__()
        self.top = nn.Parameter(torch.zeros(2 * top_dim))  # mean and log-std of h2
        self.top_down = nn.Linear(top_dim, 2 * hidden_dim)
        self.to_pixels = nn.Linear(hidden_dim, n_pixels)

    def log_prob(self, x, h1, h2):
        log_p = gaussian_log_prob(h2, *self.top.chunk(2))
        log_p = log_p + gaussian_log_prob(h1, *self.top_down(h2).chunk(2, dim=-1))
        bce = F.binary_cross_entropy_with_logits(self.to_pixels(h1), x, reduction="none")
        return log_p - bce.sum(-1)

    def dream(self, n):
        mean, log_std = self.top.chunk(2)
        h2 = sample(mean.expand(n, top_dim), log_std.expand(n, top_dim))
        h1 = sample(*self.top_down(h2).chunk(2, dim=-1))
        x = torch.bernoulli(torch.sigmoid(self.to_pixels(h1)))
        return x, h1, h2


class Recognition(nn.Module):
    """q(h1 | x) q(h2 | h1): bottom-up connections."""

    def __init__(self):
        super().__init__()
        self.bottom_up1 = nn.Linear(n_pixels, 2 * hidden_dim)
        self.bottom_up2 = nn.Linear(hidden_dim, 2 * top_dim)

    def sample(self, x):
        h1 = sample(*self.bottom_up1(x).chunk(2, dim=-1))
        h2 = sample(*self.bottom_up2(h1).chunk(2, dim=-1))
        return h1, h2

    def log_prob(self, x, h1, h2):
        log_q = gaussian_log_prob(h1, *self.bottom_up1(x).chunk(2, dim=-1))
        return log_q + gaussian_log_prob(h2, *self.bottom_up2(h1).chunk(2, dim=-1))


generative = Generative()
recognition = Recognition()
optimizer_theta = torch.optim.Adam(generative.parameters(), lr=args.theta_lr)
optimizer_phi = torch.optim.Adam(recognition.parameters(), lr=args.phi_lr)

for step in range(args.steps):
    x = data[torch.randint(0, len(data), (args.batch_size,))]
    # wake phase: the recognition net's samples are the targets the generative net reconstructs
    h1, h2 = recognition.sample(x)
    wake_theta_loss = -generative.log_prob(x, h1.detach(), h2.detach()).mean()
    # sleep phase: the generative net dreams, the recognition net learns to explain the dreams
    with torch.no_grad():
        dream_x, dream_h1, dream_h2 = generative.dream(args.batch_size)
    sleep_phi_loss = -recognition.log_prob(dream_x, dream_h1, dream_h2).mean()
    optimizer_phi.zero_grad()
    (wake_theta_loss + sleep_phi_loss).backward()
    optimizer_theta.step()
    optimizer_phi.step()
    print(f"step {step} wake {wake_theta_loss.item():.4f} sleep {sleep_phi_loss.item():.4f}")

if args.out:
    torch.save({**{f"generative.{k}": v for k, v in generative.state_dict().items()},
                **{f"recognition.{k}": v for k, v in recognition.state_dict().items()}}, args.out)
