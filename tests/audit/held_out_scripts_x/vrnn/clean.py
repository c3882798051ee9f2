"""Variational recurrent neural network (VRNN) trained with truncated backpropagation through time
on long synthetic binary sequences, written after Chung, Kastner, Dinh, Goel, Courville and
Bengio, "A Recurrent Latent Variable Model for Sequential Data" (NeurIPS 2015, arXiv:1506.02216):
at every time step the prior p(z_t | h_{t-1}), the approximate posterior q(z_t | x_t, h_{t-1})
and the generating distribution p(x_t | z_t, h_{t-1}) are conditioned on the recurrent state,
which is updated by h_t = GRU([phi_x(x_t), phi_z(z_t)], h_{t-1}); the per-step loss is the
Gaussian KL(q || prior) plus the reconstruction negative log-likelihood, summed over time, with
z_t drawn by the reparameterisation trick. The public implementation followed is
emited/VariationalRecurrentNeuralNetwork (https://github.com/emited/VariationalRecurrentNeuralNetwork,
model.py class VRNN: the feature extractors phi_x and phi_z, the encoder enc with enc_mean and a
softplus enc_std over [phi_x(x_t), h[-1]], the prior with prior_mean and prior_std over h[-1],
the decoder over [phi_z(z_t), h[-1]] with a sigmoid dec_mean, the nn.GRU recurrence,
_reparameterized_sample, _kld_gauss and _nll_bernoulli accumulated over the time loop of forward;
train.py: Adam, optimizer.zero_grad(), loss = kld_loss + nll_loss, loss.backward(),
optimizer.step() and gradient-norm clipping at 10). Where the reference's forward starts every
sequence from a zero state, this script trains on chunks of one long sequence per batch row:
forward takes the state in and returns the last one, which is carried into the next chunk and
cut there with .detach() (truncated BPTT over chunks of 16 steps, the state reset at the start of
each pass); every chunk gets its own zero_grad, backward, clip and step. The decoder outputs
Bernoulli logits (binary_cross_entropy_with_logits is the reference's Bernoulli NLL, stable),
the unused dec_std head is left out, and the gradient is clipped before the step.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--seq-len", type=int, default=80)
parser.add_argument("--chunk", type=int, default=16, help="truncated BPTT length")
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--clip", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the VRNN")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

x_dim, h_dim, z_dim, n_layers = 8, 32, 4, 1

# long binary sequences: a ball bouncing between the x_dim cells (one-hot), a few bits flipped
position = torch.randint(0, x_dim, (args.batch_size,))
velocity = torch.where(torch.rand(args.batch_size) < 0.5, -1, 1)
frames = []
for t in range(args.seq_len):
    frames.append(F.one_hot(position, x_dim).float())
    velocity = torch.where((position + velocity < 0) | (position + velocity >= x_dim),
                           -velocity, velocity)
    position = position + velocity
data = torch.stack(frames)  # seq_len x batch x x_dim
data = torch.where(torch.rand_like(data) < 0.03, 1 - data, data)


class VRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.phi_x = nn.Sequential(nn.Linear(x_dim, h_dim), nn.ReLU(),
                                   nn.Linear(h_dim, h_dim), nn.ReLU())
        self.phi_z = nn.Sequential(nn.Linear(z_dim, h_dim), nn.ReLU())
        self.enc = nn.Sequential(nn.Linear(h_dim + h_dim, h_dim), nn.ReLU(),
                                 nn.Linear(h_dim, h_dim), nn.ReLU())
        self.enc_mean = nn.Linear(h_dim, z_dim)
        self.enc_std = nn.Sequential(nn.Linear(h_dim, z_dim), nn.Softplus())
        self.prior = nn.Sequential(nn.Linear(h_dim, h_dim), nn.ReLU())
        self.prior_mean = nn.Linear(h_dim, z_dim)
        self.prior_std = nn.Sequential(nn.Linear(h_dim, z_dim), nn.Softplus())
        self.dec = nn.Sequential(nn.Linear(h_dim + h_dim, h_dim), nn.ReLU(),
                                 nn.Linear(h_dim, h_dim), nn.ReLU())
        self.dec_logits = nn.Linear(h_dim, x_dim)
        self.rnn = nn.GRU(h_dim + h_dim, h_dim, n_layers)

    def forward(self, x, h):
        """Summed KL and NLL over the chunk x (T x B x x_dim) from state h; the last state."""
        kld_loss, nll_loss = 0, 0
        for t in range(x.size(0)):
            phi_x_t = self.phi_x(x[t])
            enc_t = self.enc(torch.cat([phi_x_t, h[-1]], 1))
            enc_mean_t, enc_std_t = self.enc_mean(enc_t), self.enc_std(enc_t)
            prior_t = self.prior(h[-1])
            prior_mean_t, prior_std_t = self.prior_mean(prior_t), self.prior_std(prior_t)
            z_t = enc_mean_t + enc_std_t * torch.randn_like(enc_std_t)
            phi_z_t = self.phi_z(z_t)
            dec_t = self.dec(torch.cat([phi_z_t, h[-1]], 1))
            _, h = self.rnn(torch.cat([phi_x_t, phi_z_t], 1).unsqueeze(0), h)
            kld_loss = kld_loss + kld_gauss(enc_mean_t, enc_std_t, prior_mean_t, prior_std_t)
            nll_loss = nll_loss + F.binary_cross_entropy_with_logits(
                self.dec_logits(dec_t), x[t], reduction="sum")
        return kld_loss, nll_loss, h


def kld_gauss(mean_1, std_1, mean_2, std_2):
    kld_element = (2 * torch.log(std_2) - 2 * torch.log(std_1)
                   + (std_1.pow(2) + (mean_1 - mean_2).pow(2)) / std_2.pow(2) - 1)
    return 0.5 * torch.sum(kld_element)


model = VRNN()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for epoch in range(args.epochs):
    h = torch.zeros(n_layers, args.batch_size, h_dim)
    for start in range(0, args.seq_len, args.chunk):
        x = data[start:start + args.chunk]
        optimizer.zero_grad()
        kld_loss, nll_loss, h = model(x, h)
        loss = (kld_loss + nll_loss) / args.batch_size
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        h = h.detach()
    print(f"epoch {epoch} kld {kld_loss.item() / x.numel():.4f} "
          f"nll {nll_loss.item() / x.numel():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
