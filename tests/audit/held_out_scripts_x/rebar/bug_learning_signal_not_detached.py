"""REBAR gradient estimates for a one-layer sigmoid belief network on synthetic binary data,
written after Tucker, Mnih, Maddison, Lawson and Sohl-Dickstein, "REBAR: Low-variance, unbiased
gradient estimates for discrete latent variable models" (NeurIPS 2017, arXiv:1703.07370). The
ELBO f(b) = log p(x, b) - log q(b | x) of Bernoulli latents b = H(z), z = logit(alpha) + logit(u),
is differentiated with REINFORCE, (f(b) - c(x)) d log q(b), plus the concrete-relaxation control
variate eta * [d f(sigma_lambda(z)) - d f(sigma_lambda(z~)) - f(sigma_lambda(z~)) d log q(b)],
where z~ ~ p(z | b) is the conditional relaxed sample built from the same uniform noise; eta
(per parameter tensor), the temperature lambda and the input-dependent baseline c(x) are trained
to minimise the single-sample variance of the resulting gradient estimate. The authors' code is
tensorflow/models (https://github.com/tensorflow/models, research/rebar/rebar.py, class SBN with
SBNDynamicRebar; run by research/rebar/rebar_train.py): _random_sample draws the hard sample and
_random_sample_soft the relaxation (with the default muprop_relaxation offset), _u_to_v builds the
tied noise of the conditional sample with the normalised uniform held fixed (tf.stop_gradient),
_create_hard_elbo takes the REINFORCE term with tf.stop_gradient(hardELBO) minus the baseline,
_create_gumbel_control_variate returns stop_gradient(softELBO_v) * logQHard - softELBO +
softELBO_v, get_dynamic_rebar_gradient adds eta (multiply_by_eta_per_layer, eta = 2 sigmoid(.))
times its gradients to the REINFORCE ones, forms the variance objective mean(g^2) and the
temperature's gradient of it (the REINFORCE part through the stop-gradient learning signal and
the reparameterised part), and _create_train_op applies the model gradients with Adam and those
of eta, the baseline (the 'CV' collection) and the temperature with an Adam of ten times the
learning rate. This script follows those steps with a linear encoder and decoder (the default
nonlinear=False), n_layer = 1 and the data centred by its mean as in the reference; the
temperature's gradient is taken by autograd, the learning signal's coefficient being a copy of
f(sigma_lambda(z~)) evaluated with frozen model parameters, so it differentiates in lambda only.
Bug: the REINFORCE learning signal keeps its graph, f_hard - c(x) without .detach() (the reference
uses tf.stop_gradient(hardELBO)), so the model gradient adds log q(b) * d f(b): biased."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=24)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--temperature", type=float, default=0.5, help="initial lambda")
parser.add_argument("--out", default=None, help="where to save the SBN and control variate")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_input, n_hidden, n_data = 16, 8, 400

# synthetic binary data from a random ground-truth SBN with four latent bits
true_w = 3.0 * torch.randn(4, n_input)
true_b = (torch.rand(n_data, 4) < 0.5).float()
train_xs = (torch.rand(n_data, n_input) < torch.sigmoid((2 * true_b - 1) @ true_w - 0.5)).float()
mean_xs = train_xs.mean(0)
train_bias = -torch.log(1.0 / mean_xs.clamp(0.001, 0.999) - 1.0)


def log_bernoulli(y, logits):
    """Binary log-likelihood summed over units, also for relaxed y in (0, 1)."""
    return (y * F.logsigmoid(logits) + (1 - y) * F.logsigmoid(-logits)).sum(1)


def safe_log(x):
    return torch.log(x.clamp(1e-8, 1.0))


class SBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(n_input, n_hidden)
        self.p = nn.Linear(n_hidden, n_input)
        self.prior = nn.Parameter(torch.zeros(n_hidden))

    def encode(self, x):
        return self.q(x - mean_xs)

    def forward(self, x, b, logits):
        """ELBO terms at a (hard or relaxed) sample b: f, log p(x, b), log q(b | x)."""
        log_p = log_bernoulli(x, self.p(2 * b - 1) + train_bias)
        log_p = log_p + log_bernoulli(b, self.prior.expand_as(b))
        log_q = log_bernoulli(b, logits)
        return log_p - log_q, log_p, log_q


def u_to_v(logits, u, eps=1e-8):
    """Tied noise for z~ ~ p(z | b): same value as u, gradient with the normalised uniform fixed."""
    u_prime = torch.sigmoid(-logits)
    v_1 = ((u - u_prime) / (1 - u_prime).clamp(eps, 1)).clamp(0, 1).detach()
    v_1 = v_1 * (1 - u_prime) + u_prime
    v_0 = (u / u_prime.clamp(eps, 1)).clamp(0, 1).detach()
    v_0 = v_0 * u_prime
    v = torch.where(u > u_prime, v_1, v_0)
    return v + (u - v).detach()


def relax(logits, noise, temperature):
    z = (logits + safe_log(noise) - safe_log(1 - noise)) / temperature
    return torch.sigmoid(z + logits * temperature / (temperature + 1))


sbn = SBN()
baseline = nn.Sequential(nn.Linear(n_input, 32), nn.Tanh(), nn.Linear(32, 1))
model_params = list(sbn.parameters())
pre_eta = nn.Parameter(torch.zeros(len(model_params)))
log_temperature = nn.Parameter(torch.tensor(args.temperature).log())

optimizer = torch.optim.Adam(model_params, lr=args.lr, betas=(0.9, 0.99999))
cv_optimizer = torch.optim.Adam([pre_eta, log_temperature, *baseline.parameters()],
                                lr=10 * args.lr, betas=(0.9, 0.99999))

for step in range(args.steps):
    x = train_xs[torch.randint(0, n_data, (args.batch_size,))]
    logits = sbn.encode(x)
    u = torch.rand_like(logits)
    b = (logits + safe_log(u) - safe_log(1 - u) > 0).float()
    v = u_to_v(logits, u)
    temperature = log_temperature.exp()
    eta = 2 * torch.sigmoid(pre_eta)

    # REINFORCE with the input-dependent baseline, and the relaxed control variate
    f_hard, log_p_hard, log_q_hard = sbn(x, b, logits)
    learning_signal = f_hard - baseline(x - mean_xs).squeeze(1)
    reinforce = learning_signal * log_q_hard + log_p_hard
    f_soft = sbn(x, relax(logits, u, temperature), logits)[0]
    f_cond = sbn(x, relax(logits, v, temperature), logits)[0]
    frozen = {k: p.detach() for k, p in sbn.named_parameters()}
    f_cond_signal = functional_call(
        sbn, frozen, (x, relax(logits.detach(), v.detach(), temperature), logits.detach()))[0]
    gumbel_cv = f_cond_signal * log_q_hard - f_soft + f_cond

    f_grads = torch.autograd.grad(-reinforce.mean(), model_params, create_graph=True)
    h_grads = torch.autograd.grad(gumbel_cv.mean(), model_params, create_graph=True)
    model_grads = [g_f + eta[i] * g_h for i, (g_f, g_h) in enumerate(zip(f_grads, h_grads))]
    variance_loss = torch.cat([g.reshape(-1) for g in model_grads]).square().mean()

    optimizer.zero_grad()
    cv_optimizer.zero_grad()
    variance_loss.backward()
    for p, g in zip(model_params, model_grads):
        p.grad = g.detach()
    optimizer.step()
    cv_optimizer.step()
    if step % 50 == 0:
        print(f"step {step} elbo {f_hard.mean().item():.3f} var {variance_loss.item():.3f} "
              f"temperature {temperature.item():.3f} eta {eta.mean().item():.3f}")

if args.out:
    torch.save({"sbn": sbn.state_dict(), "baseline": baseline.state_dict(),
                "pre_eta": pre_eta.detach(), "log_temperature": log_temperature.detach()}, args.out)
