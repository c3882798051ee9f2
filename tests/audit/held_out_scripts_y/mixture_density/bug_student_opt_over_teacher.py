"""Mixture density network on a multimodal 1-D inverse problem, then a student distilled from it.

Paper: C. M. Bishop, "Mixture Density Networks", Neural Computing Research Group technical
report NCRG/94/004, Aston University, 1994.
Reference implementation: sagelywizard/pytorch-mdn, mdn/mdn.py (class MDN, functions
gaussian_probability, mdn_loss, sample); see also hardmaru/pytorch_notebooks,
mixture_density_networks.ipynb.

Bishop's toy inverse problem: t ~ U(0, 1), x = t + 0.3 sin(2 pi t) + noise, and the network
models p(t | x), which has up to three branches for one x. An MLP maps x to mixing logits,
means and log standard deviations of a K-component Gaussian mixture; the loss is the negative
log-likelihood, computed stably as -logsumexp_k(log_softmax(logits)_k + log N(t; mu_k, s_k)),
with the log-softmax normaliser differentiated like every other term.
Phase 1 fits the MDN with Adam. Phase 2 freezes the MDN and distils it into a smaller student
MDN: targets are sampled from the teacher's mixture (component by Categorical, then
mu + sigma * eps) under torch.no_grad(), as the reference's sample() detaches mu and sigma, and
a separate Adam over the student's parameters only minimises the student's NLL of those
samples. No gradient reaches the teacher in phase 2.
Bug: the phase-2 optimizer is built over the frozen teacher's parameters instead of the
student's, so the student's NLL is back-propagated but the student is never updated.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MDN(nn.Module):
    def __init__(self, hidden, k):
        super().__init__()
        self.k = k
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(),
                                  nn.Linear(hidden, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, 3 * k)

    def forward(self, x):
        logits, mu, log_sigma = self.head(self.body(x)).split(self.k, dim=-1)
        return logits, mu, log_sigma.clamp(-6.0, 3.0)


def mdn_nll(logits, mu, log_sigma, t):
    log_pi = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    z = (t - mu) / log_sigma.exp()
    log_n = -0.5 * z ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(log_pi + log_n, dim=-1).mean()


def mdn_sample(logits, mu, log_sigma):
    comp = torch.distributions.Categorical(logits=logits).sample().unsqueeze(-1)
    m = mu.gather(-1, comp)
    s = log_sigma.exp().gather(-1, comp)
    return m + s * torch.randn_like(m)


def make_data(n):
    t = torch.rand(n, 1)
    x = t + 0.3 * torch.sin(2 * math.pi * t) + 0.1 * (2 * torch.rand(n, 1) - 1)
    return x, t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=str, default=None)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--distill_steps", type=int, default=80)
    p.add_argument("--batch", type=int, default=128)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    x_all, t_all = make_data(1024)
    mdn = MDN(32, 5)
    opt = torch.optim.Adam(mdn.parameters(), lr=5e-3)

    for step in range(args.steps):
        idx = torch.randint(0, x_all.shape[0], (args.batch,))
        x, t = x_all[idx], t_all[idx]
        logits, mu, log_sigma = mdn(x)
        loss = mdn_nll(logits, mu, log_sigma, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 30 == 0 or step == args.steps - 1:
            print(f"mdn step {step:4d} nll {loss.item():.4f}")

    # phase 2: distil the frozen MDN into a smaller student from its samples
    mdn.requires_grad_(False)
    mdn.eval()
    student = MDN(16, 3)
    opt_s = torch.optim.Adam(mdn.parameters(), lr=5e-3)

    for step in range(args.distill_steps):
        x = x_all[torch.randint(0, x_all.shape[0], (args.batch,))]
        with torch.no_grad():
            t_hat = mdn_sample(*mdn(x))
        loss_s = mdn_nll(*student(x), t_hat)
        opt_s.zero_grad()
        loss_s.backward()
        opt_s.step()
        if step % 20 == 0 or step == args.distill_steps - 1:
            print(f"student step {step:4d} nll {loss_s.item():.4f}")

    with torch.no_grad():
        print(f"final: teacher nll {mdn_nll(*mdn(x_all), t_all).item():.4f} "
              f"student nll {mdn_nll(*student(x_all), t_all).item():.4f}")

    if args.out is not None:
        torch.save({"mdn": mdn.state_dict(), "student": student.state_dict()}, args.out)


if __name__ == "__main__":
    main()
