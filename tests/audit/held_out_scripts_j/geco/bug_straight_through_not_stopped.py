"""A variational auto-encoder trained with GECO at a tiny size, written after Rezende and Viola,
"Taming VAEs" (arXiv:1810.00597), section 3 and algorithm 1 (generalised ELBO with constrained
optimisation: minimise KL[q(z|x) || p(z)] subject to E[C(x, g(z))] <= 0, with the reconstruction
constraint C = ||x - g(z)||^2 - kappa^2, through the Lagrangian KL + lambda * C; C_ma, a moving
average of the constraint started from its first value; the straight-through C_t <- C_t +
StopGradient(C_ma - C_t), whose value is the moving average and whose gradient is the minibatch
constraint's; and the multiplier updated after the step as lambda <- lambda * exp(nu * C_t), outside
the gradient) and the PyTorch reimplementation in applied-ai-lab/genesis
(https://github.com/applied-ai-lab/genesis, utils/geco.py GECO.loss: the moving average err_ema
started from the first error and the multiplier (there, beta on the KL) updated under
torch.no_grad() with exp(step_size * constraint) and clamped, while the loss keeps its gradient). A
Gaussian encoder (a shared body, then a mean head and a log-variance head), reparameterised samples
and a decoder, trained by one Adam over all of them. Observations made in the script from a
two-dimensional latent through a fixed nonlinear map. Injected bug: the StopGradient of the
straight-through estimator is dropped (constraint = c_step + (c_ma - c_step), for algorithm 1's C_t
+ StopGradient(C_ma - C_t)), so the constraint keeps the moving average's value but its gradient,
that of c_step minus that of c_step, is zero: the lambda-weighted reconstruction term gives the
encoder and the decoder no gradient, the model is trained by the KL alone towards the prior, and the
multiplier, fed the same values, grows while the reconstruction never improves."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--hidden-dim", type=int, default=32)
parser.add_argument("--latent-dim", type=int, default=2)
parser.add_argument("--kappa", type=float, default=1.0, help="tolerance of the reconstruction")
parser.add_argument("--alpha", type=float, default=0.9, help="decay of the moving average")
parser.add_argument("--lambda-lr", type=float, default=0.01, dest="lambda_lr")
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, n_data = 16, 1024
mixing = torch.randn(2, obs_dim)
true_latents = torch.randn(n_data, 2)
data = torch.tanh(true_latents @ mixing) + 0.05 * torch.randn(n_data, obs_dim)


class Encoder(nn.Module):
    """q(z | x) = N(mu(x), diag(exp(log_var(x)))) from a shared body and two heads."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, args.hidden_dim), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(args.hidden_dim, args.latent_dim),
                                    nn.Linear(args.hidden_dim, args.latent_dim)])

    def forward(self, x):
        h = self.body(x)
        return self.heads[0](h), self.heads[1](h)


encoder = Encoder()
decoder = nn.Sequential(nn.Linear(args.latent_dim, args.hidden_dim), nn.ReLU(),
                        nn.Linear(args.hidden_dim, obs_dim))
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=args.lr)
lagrange = torch.tensor(1.0)
c_ma = None
for step in range(args.steps):
    x = data[torch.randint(0, n_data, (args.batch_size,))]
    mu, log_var = encoder(x)
    z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
    x_hat = decoder(z)
    kl = 0.5 * (mu.pow(2) + log_var.exp() - 1 - log_var).sum(1).mean()
    c_step = (x - x_hat).pow(2).sum(1).mean() - args.kappa ** 2
    c_value = c_step.detach()
    c_ma = c_value if c_ma is None else args.alpha * c_ma + (1 - args.alpha) * c_value
    # straight-through: the value of the moving average, the gradient of this batch's constraint
    constraint = c_step + (c_ma - c_step)
    loss = kl + lagrange * constraint
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        lagrange = (lagrange * torch.exp(args.lambda_lr * constraint)).clamp(1e-3, 1e3)
    if step % 10 == 0:
        print(f"step {step} kl {kl.item():.4f} constraint {c_step.item():.4f} "
              f"moving average {c_ma.item():.4f} lambda {lagrange.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "lagrange": lagrange}, args.out)
