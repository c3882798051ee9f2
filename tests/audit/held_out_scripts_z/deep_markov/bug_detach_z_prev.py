"""Deep Markov model fitted with a structured inference network (the DKS variant).

Paper: Rahul G. Krishnan, Uri Shalit, David Sontag, "Structured Inference Networks for
Nonlinear State Space Models", AAAI 2017, arXiv:1609.09869.
Reference implementations: pyro-ppl/pyro, examples/dmm/dmm.py (classes Emitter,
GatedTransition, Combiner and DMM with its model/guide pair; main/process_minibatch for the
KL annealing factor and the single clipped Adam over all modules), and
clinicalml/structuredinference, stinfmodel_fast/dkf.py (class DKF, the gated transition and
the analytic temporal KL).

The script draws binary sequences from a small nonlinear latent process and fits a DMM to
them. The generative side is a gated transition p(z_t | z_{t-1}) and an MLP emitter giving
Bernoulli logits for x_t. The inference side runs an RNN backwards over the sequence, so its
state at t summarises x_{t:T}, and a combiner merges that state with z_{t-1} into
q(z_t | z_{t-1}, x_{t:T}). The loss is the negative ELBO: Bernoulli reconstruction plus the
analytic Gaussian KL between q and the transition prior at every step, the KL scaled by an
annealing factor that rises linearly to one. All latents are reparameterised samples and
nothing in the method is cut: the sample z_t feeds the next combiner step and the next prior,
so the ELBO reaches the combiner and the RNN through the whole chain. The initial latents
z_0, z_q_0 and the initial RNN state h_0 are learnt parameters, and one Adam optimizer with
gradient-norm clipping trains every module and parameter. Bug: the sample z_t is detached
before it is carried to the next step, so the ELBO terms of later steps no longer reach the
combiner, the backward RNN and z_q_0 through z_{t-1}; only each step's own path trains them.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Emitter(nn.Module):
    def __init__(self, x_dim, z_dim, emission_dim):
        super().__init__()
        self.lin_z_to_hidden = nn.Linear(z_dim, emission_dim)
        self.lin_hidden_to_hidden = nn.Linear(emission_dim, emission_dim)
        self.lin_hidden_to_input = nn.Linear(emission_dim, x_dim)

    def forward(self, z_t):
        h = torch.relu(self.lin_z_to_hidden(z_t))
        h = torch.relu(self.lin_hidden_to_hidden(h))
        return self.lin_hidden_to_input(h)


class GatedTransition(nn.Module):
    def __init__(self, z_dim, transition_dim):
        super().__init__()
        self.lin_gate_z_to_hidden = nn.Linear(z_dim, transition_dim)
        self.lin_gate_hidden_to_z = nn.Linear(transition_dim, z_dim)
        self.lin_prop_z_to_hidden = nn.Linear(z_dim, transition_dim)
        self.lin_prop_hidden_to_z = nn.Linear(transition_dim, z_dim)
        self.lin_sig = nn.Linear(z_dim, z_dim)
        self.lin_z_to_loc = nn.Linear(z_dim, z_dim)
        with torch.no_grad():
            self.lin_z_to_loc.weight.copy_(torch.eye(z_dim))
            self.lin_z_to_loc.bias.zero_()

    def forward(self, z_prev):
        gate = torch.sigmoid(self.lin_gate_hidden_to_z(torch.relu(
            self.lin_gate_z_to_hidden(z_prev))))
        proposed = self.lin_prop_hidden_to_z(torch.relu(self.lin_prop_z_to_hidden(z_prev)))
        loc = (1 - gate) * self.lin_z_to_loc(z_prev) + gate * proposed
        scale = F.softplus(self.lin_sig(torch.relu(proposed)))
        return loc, scale


class Combiner(nn.Module):
    def __init__(self, z_dim, rnn_dim):
        super().__init__()
        self.lin_z_to_hidden = nn.Linear(z_dim, rnn_dim)
        self.lin_hidden_to_loc = nn.Linear(rnn_dim, z_dim)
        self.lin_hidden_to_scale = nn.Linear(rnn_dim, z_dim)

    def forward(self, z_prev, h_rnn):
        h = 0.5 * (torch.tanh(self.lin_z_to_hidden(z_prev)) + h_rnn)
        return self.lin_hidden_to_loc(h), F.softplus(self.lin_hidden_to_scale(h))


def gauss_kl(q_loc, q_scale, p_loc, p_scale):
    return (torch.log(p_scale / q_scale)
            + (q_scale ** 2 + (q_loc - p_loc) ** 2) / (2 * p_scale ** 2) - 0.5)


class DMM(nn.Module):
    def __init__(self, x_dim, z_dim=4, emission_dim=16, transition_dim=16, rnn_dim=16):
        super().__init__()
        self.emitter = Emitter(x_dim, z_dim, emission_dim)
        self.trans = GatedTransition(z_dim, transition_dim)
        self.combiner = Combiner(z_dim, rnn_dim)
        self.rnn = nn.RNN(x_dim, rnn_dim, nonlinearity="relu", batch_first=True)
        self.z_0 = nn.Parameter(torch.zeros(z_dim))
        self.z_q_0 = nn.Parameter(torch.zeros(z_dim))
        self.h_0 = nn.Parameter(torch.zeros(1, 1, rnn_dim))

    def neg_elbo(self, x, annealing_factor):
        B, T, _ = x.shape
        h_0 = self.h_0.expand(1, B, self.h_0.shape[-1]).contiguous()
        rnn_out, _ = self.rnn(torch.flip(x, [1]), h_0)
        rnn_out = torch.flip(rnn_out, [1])
        z_prev_q = self.z_q_0.expand(B, -1)
        z_prev_p = self.z_0.expand(B, -1)
        rec, kl = 0.0, 0.0
        for t in range(T):
            q_loc, q_scale = self.combiner(z_prev_q, rnn_out[:, t])
            z_t = q_loc + q_scale * torch.randn_like(q_loc)
            p_loc, p_scale = self.trans(z_prev_p)
            kl = kl + gauss_kl(q_loc, q_scale, p_loc, p_scale).sum(-1)
            logits = self.emitter(z_t)
            rec = rec - F.binary_cross_entropy_with_logits(
                logits, x[:, t], reduction="none").sum(-1)
            z_prev_q = z_prev_p = z_t.detach()
        loss = (annealing_factor * kl - rec).sum() / (B * T)
        return loss, (kl - rec).sum().item() / (B * T)


def make_data(n, T, x_dim):
    A = torch.tensor([[0.95, -0.30], [0.30, 0.95]])
    W = torch.randn(2, x_dim) * 2.0
    b = torch.randn(x_dim) * 0.5
    z = torch.randn(n, 2)
    xs = []
    for _ in range(T):
        z = torch.tanh(z @ A.T) * 1.5 + 0.2 * torch.randn(n, 2)
        xs.append(torch.bernoulli(torch.sigmoid(z @ W + b)))
    return torch.stack(xs, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--clip-norm", type=float, default=10.0)
    parser.add_argument("--annealing-epochs", type=int, default=5)
    parser.add_argument("--min-af", type=float, default=0.2)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    x_dim, T, n = 8, 10, 64
    data = make_data(n, T, x_dim)
    dmm = DMM(x_dim)
    opt = torch.optim.Adam(dmm.parameters(), lr=args.lr, betas=(0.96, 0.999))

    n_batches = n // args.batch_size
    for epoch in range(args.epochs):
        perm = torch.randperm(n)
        epoch_nll = 0.0
        for i in range(n_batches):
            if epoch < args.annealing_epochs:
                frac = (i + epoch * n_batches + 1) / (args.annealing_epochs * n_batches)
                af = args.min_af + (1.0 - args.min_af) * frac
            else:
                af = 1.0
            x = data[perm[i * args.batch_size:(i + 1) * args.batch_size]]
            loss, nll = dmm.neg_elbo(x, af)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(dmm.parameters(), args.clip_norm)
            opt.step()
            epoch_nll += nll
        if epoch % 3 == 0 or epoch == args.epochs - 1:
            print(f"epoch {epoch:3d}  -elbo/step {epoch_nll / n_batches:.4f}  af {af:.2f}")

    if args.out:
        torch.save({"dmm": {k: v for k, v in dmm.state_dict().items() if not k.endswith("_0")},
                    "z_0": dmm.z_0.detach().clone(),
                    "z_q_0": dmm.z_q_0.detach().clone(),
                    "h_0": dmm.h_0.detach().clone()}, args.out)


if __name__ == "__main__":
    main()
