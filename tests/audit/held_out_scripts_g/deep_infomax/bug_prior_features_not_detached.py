"""Deep InfoMax at a tiny size, written after Hjelm, Fedorov, Lavoie-Marchildon, Grewal, Bachman,
Trischler and Bengio, "Learning deep representations by mutual information estimation and
maximization" (ICLR 2019, arXiv:1808.06670), with rdevon/DIM (https://github.com/rdevon/DIM,
cortex_DIM/models/dim.py, cortex_DIM/functions/dim_losses.py, cortex_DIM/models/prior_matching.py)
and DuaneNielsen/DeepInfomaxPytorch (https://github.com/DuaneNielsen/DeepInfomaxPytorch, train.py
DeepInfoMaxLoss and its training loop, models.py). An encoder gives a local feature map ``M`` and a
global feature ``y`` (squashed by a sigmoid, as for a uniform prior); a global and a local
statistics network score (y, M) pairs of one example against pairs with the ``M`` of another
example, and the Jensen-Shannon estimate of their mutual information is maximised. Two phases: the
encoder and the statistics networks (one optimizer) are warmed up on the mutual-information terms
alone; then the prior-matching term is added: a discriminator, with an optimizer of its own, learns
to tell samples of the uniform prior from the encoder's global features cut from the graph
(.detach()), while the encoder is trained to fool it by a separate non-saturating term computed
with the discriminator's parameters frozen (requires_grad_(False)); as in the DuaneNielsen loop,
both optimizers are cleared at the top of the iteration, the summed losses are backpropagated once
and both optimizers step. Noisy three-channel sinusoids of a few frequencies and random phases,
made in the script. Injected bug: the discriminator's loss reads the encoder's global features
without .detach(), so the single backward also sends the discriminator's gradient into the
encoder, which the encoder's step then follows: the encoder is trained to help the discriminator
tell its features from the prior as well as to fool it; second phase of a two-phase script."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--alpha", type=float, default=0.5, help="weight of the global MI term")
parser.add_argument("--beta", type=float, default=1.0, help="weight of the local MI term")
parser.add_argument("--gamma", type=float, default=0.1, help="weight of the prior term")
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

channels, length, feature_channels, global_dim = 3, 16, 16, 8


def sample(batch_size):
    freqs = torch.randint(1, 4, (batch_size, 1, 1)).float()
    phases = 2 * math.pi * torch.rand(batch_size, channels, 1)
    t = torch.linspace(0, 2 * math.pi, length)
    return torch.sin(freqs * t + phases) + 0.1 * torch.randn(batch_size, channels, length)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.local_layers = nn.Sequential(
            nn.Conv1d(channels, 16, 3, padding=1), nn.ReLU(),
            nn.Conv1d(16, feature_channels, 4, stride=2, padding=1), nn.ReLU())
        self.global_layers = nn.Sequential(
            nn.Flatten(), nn.Linear(feature_channels * length // 2, 64), nn.ReLU(),
            nn.Linear(64, global_dim))

    def forward(self, x):
        M = self.local_layers(x)  # (batch, feature_channels, length // 2)
        y = torch.sigmoid(self.global_layers(M))
        return y, M


class GlobalStatistics(nn.Module):
    def __init__(self):
        super().__init__()
        self.c0 = nn.Conv1d(feature_channels, 8, 3)
        self.l0 = nn.Linear(8 * (length // 2 - 2) + global_dim, 64)
        self.l1 = nn.Linear(64, 1)

    def forward(self, y, M):
        h = F.relu(self.c0(M)).flatten(1)
        return self.l1(F.relu(self.l0(torch.cat((h, y), dim=1))))


class LocalStatistics(nn.Module):
    def __init__(self):
        super().__init__()
        self.c0 = nn.Conv1d(feature_channels + global_dim, 32, 1)
        self.c1 = nn.Conv1d(32, 32, 1)
        self.c2 = nn.Conv1d(32, 1, 1)

    def forward(self, yM):
        return self.c2(F.relu(self.c1(F.relu(self.c0(yM)))))


class PriorDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.l0 = nn.Linear(global_dim, 64)
        self.l1 = nn.Linear(64, 16)
        self.l2 = nn.Linear(16, 1)

    def forward(self, y):
        return self.l2(F.relu(self.l1(F.relu(self.l0(y)))))  # logit of "drawn from the prior"


def jsd_loss(positive, negative):
    Ej = -F.softplus(-positive).mean()
    Em = F.softplus(negative).mean()
    return Em - Ej


def mi_loss(y, M):
    M_prime = torch.cat((M[1:], M[:1]), dim=0)  # the map of another example
    y_exp = y.unsqueeze(-1).expand(-1, -1, M.shape[2])
    local = jsd_loss(local_d(torch.cat((M, y_exp), dim=1)),
                     local_d(torch.cat((M_prime, y_exp), dim=1)))
    glob = jsd_loss(global_d(y, M), global_d(y, M_prime))
    return args.alpha * glob + args.beta * local


encoder, global_d, local_d = Encoder(), GlobalStatistics(), LocalStatistics()
prior_d = PriorDiscriminator()
optim = torch.optim.Adam([*encoder.parameters(), *global_d.parameters(), *local_d.parameters()],
                         lr=args.lr)
prior_optim = torch.optim.Adam(prior_d.parameters(), lr=args.lr)

# phase 1: warm-up of the encoder and the statistics networks on the MI terms
for step in range(args.warmup_steps):
    y, M = encoder(sample(args.batch_size))
    loss = mi_loss(y, M)
    optim.zero_grad()
    loss.backward()
    optim.step()
    print(f"warm-up {step} mi loss {loss.item():.4f}")

# phase 2: the full objective, with adversarial prior matching on y
for step in range(args.steps):
    optim.zero_grad()
    prior_optim.zero_grad()
    y, M = encoder(sample(args.batch_size))
    prior = torch.rand_like(y)
    prior_d.requires_grad_(False)
    encoder_prior_loss = F.softplus(-prior_d(y)).mean()  # non-saturating: y should pass as prior
    prior_d.requires_grad_(True)
    discriminator_loss = F.softplus(-prior_d(prior)).mean() + F.softplus(prior_d(y)).mean()
    loss = mi_loss(y, M) + args.gamma * (encoder_prior_loss + discriminator_loss)
    loss.backward()
    optim.step()
    prior_optim.step()
    print(f"step {step} loss {loss.item():.4f} discriminator {discriminator_loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "global_d": global_d.state_dict(),
                "local_d": local_d.state_dict(), "prior_d": prior_d.state_dict()}, args.out)
