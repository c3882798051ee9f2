"""A vector-quantised autoencoder whose dead codes are restarted at intervals, at a tiny size,
written after van den Oord, Vinyals and Kavukcuoglu, "Neural Discrete Representation Learning"
(NeurIPS 2017, arXiv:1711.00937) for the codebook and commitment losses and the
straight-through copy, and the random restarts of unused codes of Dhariwal et al., "Jukebox: A
Generative Model for Music" (arXiv:2005.00341; openai/jukebox) and of Huh, Cheung, Agrawal and
Isola, "Straightening Out the Straight-Through Estimator: Overcoming Optimization Challenges in
Vector Quantized Networks" (ICML 2023, arXiv:2305.08842; minyoungg/vqtorch, its replacement of
dead codes). The codebook is a parameter trained by its loss; every ``--restart-every`` steps
each code no input chose since the last restart is re-seeded with a random encoder output. The
bug: the restart sets the codebook by a new parameter, ``self.codebook = nn.Parameter(fresh)``,
where the published code writes into it in place. From the first restart on, the optimizer
steps a codebook no loss reaches, and the live one, which gets gradient, only moves at restarts.
``--out PATH`` saves the weights, the codebook's included."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--restart-every", type=int, default=10)
parser.add_argument("--codes", type=int, default=16)
parser.add_argument("--beta", type=float, default=0.25)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width = 16, 4
patterns = torch.randn(6, dim)


def batch(n):
    return patterns[torch.randint(0, 6, (n,))] + 0.1 * torch.randn(n, dim)


class Quantizer(nn.Module):
    """The nearest code for each input; counts each code's use since the last restart."""

    def __init__(self, codes, width):
        super().__init__()
        self.codebook = nn.Parameter(torch.randn(codes, width))
        self.register_buffer("usage", torch.zeros(codes))

    def forward(self, z_e):
        with torch.no_grad():
            index = torch.cdist(z_e, self.codebook).argmin(dim=1)
            self.usage += torch.bincount(index, minlength=self.usage.numel())
        return self.codebook[index]

    def restart_dead_codes(self, z_e):
        """Each code unused since the last restart becomes a random encoder output of the
        batch; the number of codes restarted."""
        with torch.no_grad():
            dead = self.usage == 0
            fresh = self.codebook.detach().clone()
            fresh[dead] = z_e[torch.randint(0, z_e.shape[0], (int(dead.sum()),))]
            self.codebook = nn.Parameter(fresh)
            self.usage.zero_()
        return int(dead.sum())


encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, width))
quantizer = Quantizer(args.codes, width)
decoder = nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, dim))
model = nn.ModuleDict({"encoder": encoder, "quantizer": quantizer, "decoder": decoder})
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for step in range(args.steps):
    x = batch(args.batch_size)
    z_e = encoder(x)
    z_q = quantizer(z_e)
    reconstruction = F.mse_loss(decoder(z_e + (z_q - z_e).detach()), x)
    codebook_loss = F.mse_loss(z_q, z_e.detach())
    commitment = F.mse_loss(z_e, z_q.detach())
    loss = reconstruction + codebook_loss + args.beta * commitment
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
    if (step + 1) % args.restart_every == 0:
        restarted = quantizer.restart_dead_codes(z_e)
        print(f"step {step} restarted {restarted} codes")

if args.out:
    torch.save(model.state_dict(), args.out)
