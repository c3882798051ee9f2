"""TimeGAN (time-series GAN) trained on multivariate sine sequences, in its three phases.

Paper: Jinsung Yoon, Daniel Jarrett and Mihaela van der Schaar, "Time-series Generative
Adversarial Networks", Advances in Neural Information Processing Systems 32 (NeurIPS 2019).
Reference implementation: jsyoon0823/TimeGAN, timegan.py (timegan: the embedder, recovery,
generator, supervisor and discriminator, each a stacked GRU with a dense head; the losses
E_loss0, E_loss, G_loss_S, G_loss and D_loss; five Adam solvers E0_solver and E_solver over
e_vars + r_vars, GS_solver and G_solver over g_vars + s_vars, D_solver over d_vars; the loops
"Embedding Network Training", "Training with Supervised Loss Only" and "Joint Training"),
utils.py (batch_generator, random_generator), data_loading.py (sine_data_generation), and the
PyTorch port birdx0810/timegan-pytorch, models/timegan.py (TimeGAN._recovery_forward,
_supervisor_forward, _generator_forward, _discriminator_forward) and models/utils.py
(embedding_trainer, supervisor_trainer, joint_trainer).

Each sequence has three features sin(f t + p) with f, p ~ U(0, 0.1), mapped to [0, 1] and then
min-max scaled as timegan() does; all sequences have the full length, so the networks run on
the padded batch directly. The embedder, recovery, generator and supervisor end in a sigmoid,
the discriminator gives one logit per time step; the supervisor has num_layers - 1 GRU layers.
Phase 1 trains the embedder and recovery on 10 sqrt(MSE(X, X_tilde)). Phase 2 trains the
generator and supervisor on the one-step-ahead supervised loss G_loss_S = MSE(H[:, 1:],
S(H)[:, :-1]) (only the supervisor receives gradient there). Phase 3 repeats: two generator
steps, each followed by an embedder step on the same batch, then one discriminator step taken
only when the discriminator loss exceeds 0.15. The generator loss is the adversarial loss on
S(G(Z)) and on G(Z), 100 sqrt(G_loss_S) and 100 times the two-moment loss on X_hat =
R(S(G(Z))); the embedder loss adds 0.1 G_loss_S to the reconstruction loss. Every solver is
its own Adam and zeroes its own gradients before its backward; in the discriminator step the
embedder, generator and supervisor outputs are computed under torch.no_grad(), since D_solver
only updates d_vars.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_seq", type=int, default=64)
parser.add_argument("--seq_len", type=int, default=12)
parser.add_argument("--dim", type=int, default=3)
parser.add_argument("--hidden_dim", type=int, default=8)
parser.add_argument("--num_layers", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--embed_iters", type=int, default=25)
parser.add_argument("--sup_iters", type=int, default=25)
parser.add_argument("--joint_iters", type=int, default=10)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--gamma", type=float, default=1.0)
parser.add_argument("--d_thresh", type=float, default=0.15)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def sine_data(n, seq_len, dim):
    freq = torch.rand(n, 1, dim) * 0.1
    phase = torch.rand(n, 1, dim) * 0.1
    t = torch.arange(seq_len, dtype=torch.float32).view(1, seq_len, 1)
    return (torch.sin(freq * t + phase) + 1.0) * 0.5


def min_max_scale(data):
    data = data - data.amin(dim=(0, 1))
    return data / (data.amax(dim=(0, 1)) + 1e-7)


class RecurrentNet(nn.Module):
    """A stacked GRU and a dense head applied at every time step."""

    def __init__(self, n_in, hidden_dim, n_out, num_layers, sigmoid=True):
        super().__init__()
        self.rnn = nn.GRU(n_in, hidden_dim, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_dim, n_out)
        self.sigmoid = sigmoid
        for name, p in self.rnn.named_parameters():
            if name.startswith("weight"):
                nn.init.xavier_uniform_(p)
        nn.init.xavier_uniform_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        out, _ = self.rnn(x)
        out = self.head(out)
        return torch.sigmoid(out) if self.sigmoid else out


data = min_max_scale(sine_data(args.n_seq, args.seq_len, args.dim))
z_dim = args.dim


def batch_generator():
    idx = torch.randperm(args.n_seq)[:args.batch_size]
    return data[idx]


def random_generator():
    return torch.rand(args.batch_size, args.seq_len, z_dim)


embedder = RecurrentNet(args.dim, args.hidden_dim, args.hidden_dim, args.num_layers)
recovery = RecurrentNet(args.hidden_dim, args.hidden_dim, args.dim, args.num_layers)
generator = RecurrentNet(z_dim, args.hidden_dim, args.hidden_dim, args.num_layers)
supervisor = RecurrentNet(args.hidden_dim, args.hidden_dim, args.hidden_dim, args.num_layers - 1)
discriminator = RecurrentNet(args.hidden_dim, args.hidden_dim, 1, args.num_layers, sigmoid=False)

er_params = list(embedder.parameters()) + list(recovery.parameters())
gs_params = list(generator.parameters()) + list(supervisor.parameters())
e0_solver = torch.optim.Adam(er_params, lr=args.lr)
e_solver = torch.optim.Adam(er_params, lr=args.lr)
gs_solver = torch.optim.Adam(gs_params, lr=args.lr)
g_solver = torch.optim.Adam(gs_params, lr=args.lr)
d_solver = torch.optim.Adam(discriminator.parameters(), lr=args.lr)


def supervised_loss(h):
    h_hat_supervise = supervisor(h)
    return F.mse_loss(h_hat_supervise[:, :-1, :], h[:, 1:, :])


def bce(logits, target_value):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target_value))


# 1. Embedding network training
print("Start Embedding Network Training")
for itt in range(args.embed_iters):
    x_mb = batch_generator()
    h = embedder(x_mb)
    x_tilde = recovery(h)
    e_loss_t0 = F.mse_loss(x_tilde, x_mb)
    e_loss0 = 10 * torch.sqrt(e_loss_t0)
    e0_solver.zero_grad()
    e_loss0.backward()
    e0_solver.step()
    if itt % 10 == 0 or itt == args.embed_iters - 1:
        print(f"step {itt:3d} e_loss {e_loss_t0.sqrt().item():.4f}")

# 2. Training only with the supervised loss
print("Start Training with Supervised Loss Only")
for itt in range(args.sup_iters):
    x_mb = batch_generator()
    h = embedder(x_mb)
    g_loss_s = supervised_loss(h)
    gs_solver.zero_grad()
    g_loss_s.backward()
    gs_solver.step()
    if itt % 10 == 0 or itt == args.sup_iters - 1:
        print(f"step {itt:3d} s_loss {g_loss_s.sqrt().item():.4f}")

# 3. Joint training
print("Start Joint Training")
for itt in range(args.joint_iters):
    for kk in range(2):
        x_mb = batch_generator()
        z_mb = random_generator()
        # generator step
        h = embedder(x_mb)
        e_hat = generator(z_mb)
        h_hat = supervisor(e_hat)
        x_hat = recovery(h_hat)
        y_fake = discriminator(h_hat)
        y_fake_e = discriminator(e_hat)
        g_loss_u = bce(y_fake, 1.0)
        g_loss_u_e = bce(y_fake_e, 1.0)
        g_loss_s = supervised_loss(h)
        std_hat = torch.sqrt(x_hat.var(dim=0, unbiased=False) + 1e-6)
        std_real = torch.sqrt(x_mb.var(dim=0, unbiased=False) + 1e-6)
        g_loss_v1 = torch.mean(torch.abs(std_hat - std_real))
        g_loss_v2 = torch.mean(torch.abs(x_hat.mean(dim=0) - x_mb.mean(dim=0)))
        g_loss_v = g_loss_v1 + g_loss_v2
        g_loss = (g_loss_u + args.gamma * g_loss_u_e + 100 * torch.sqrt(g_loss_s)
                  + 100 * g_loss_v)
        g_solver.zero_grad()
        g_loss.backward()
        g_solver.step()
        # embedder step on the same batch
        h = embedder(x_mb)
        x_tilde = recovery(h)
        e_loss_t0 = F.mse_loss(x_tilde, x_mb)
        e_loss = 10 * torch.sqrt(e_loss_t0) + 0.1 * supervised_loss(h)
        e_solver.zero_grad()
        e_loss.backward()
        e_solver.step()
    # discriminator step
    x_mb = batch_generator()
    z_mb = random_generator()
    with torch.no_grad():
        h = embedder(x_mb)
        e_hat = generator(z_mb)
        h_hat = supervisor(e_hat)
    y_real = discriminator(h)
    y_fake = discriminator(h_hat)
    y_fake_e = discriminator(e_hat)
    d_loss = bce(y_real, 1.0) + bce(y_fake, 0.0) + args.gamma * bce(y_fake_e, 0.0)
    if d_loss.item() > args.d_thresh:
        d_solver.zero_grad()
        d_loss.backward()
        d_solver.step()
    if itt % 3 == 0 or itt == args.joint_iters - 1:
        print(f"step {itt:3d} d_loss {d_loss.item():.4f} g_loss_u {g_loss_u.item():.4f} "
              f"g_loss_s {g_loss_s.sqrt().item():.4f} g_loss_v {g_loss_v.item():.4f} "
              f"e_loss_t0 {e_loss_t0.sqrt().item():.4f}")

with torch.no_grad():
    x_hat = recovery(supervisor(generator(torch.rand(args.n_seq, args.seq_len, z_dim))))
print(f"synthetic mean {x_hat.mean().item():.4f} real mean {data.mean().item():.4f}")

if args.out:
    torch.save({
        "embedder": embedder.state_dict(),
        "recovery": recovery.state_dict(),
        "generator": generator.state_dict(),
        "supervisor": supervisor.state_dict(),
        "discriminator": discriminator.state_dict(),
    }, args.out)
