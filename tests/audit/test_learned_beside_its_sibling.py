"""A learned tensor kept out of ``parameters()`` beside its sibling of the same role: a layer's
weight and its bias each carry a tensor of one role (Bayes by Backprop's ``weight_rho`` and
``bias_rho``, a noisy layer's ``sigma_weight`` and ``sigma_bias``), one made an
``nn.Parameter`` and the other registered as a buffer, or left a plain tensor, that nothing
writes during the run. No gradient reaches it and no optimizer holds it: the layer learns one
half of a role and keeps the other at its initial value.

Written after Blundell et al. 2015 ("Weight Uncertainty in Neural Networks", Bayes by
Backprop: every mean and every softplus-scale parameter of the variational posterior is
learned, as in nitarshan/bayes-by-backprop's ``BayesianLinear``) and after Fortunato et al.
2018 (NoisyNet; PacktPublishing/Deep-Reinforcement-Learning-Hands-On, Chapter07
``lib/dqn_model.py``, whose ``NoisyLinear`` subclasses ``nn.Linear`` with learned
``sigma_weight`` and ``sigma_bias`` and noise buffers ``epsilon_weight`` and ``epsilon_bias``
drawn afresh at every forward). Guards: the same layers as published; a layer whose buffers are
written every forward (a spectral norm's power-iteration vector beside its learned weight); a
fixed prior kept as buffers for both the weight and the bias."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

BAYES = """\
import argparse
import math
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class BayesianLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight_mu = nn.Parameter(torch.empty(n_out, n_in).uniform_(-0.2, 0.2))
        WEIGHT_RHO
        self.bias_mu = nn.Parameter(torch.empty(n_out).uniform_(-0.2, 0.2))
        BIAS_RHO
        PRIOR

    def forward(self, x):
        w_sigma = F.softplus(self.weight_rho)
        b_sigma = F.softplus(self.bias_rho)
        weight = self.weight_mu + w_sigma * torch.randn_like(w_sigma)
        bias = self.bias_mu + b_sigma * torch.randn_like(b_sigma)
        return F.linear(x, weight, bias)

    def kl(self):
        return (kl(self.weight_mu, F.softplus(self.weight_rho))
                + kl(self.bias_mu, F.softplus(self.bias_rho)))


def kl(mu, sigma, prior_sigma=1.0):
    return (torch.log(prior_sigma / sigma) + (sigma ** 2 + mu ** 2) / (2 * prior_sigma ** 2)
            - 0.5).sum()


net = nn.Sequential(BayesianLinear(1, 16), nn.ReLU(), BayesianLinear(16, 1))
x = torch.linspace(-2, 2, 64).unsqueeze(1)
y = torch.sin(2 * x) + 0.1 * torch.randn_like(x)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(6):
    nll = F.mse_loss(net(x), y, reduction="sum")
    kl_term = sum(m.kl() for m in net if isinstance(m, BayesianLinear))
    loss = nll + kl_term / 64
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""

_WEIGHT_RHO = "self.weight_rho = nn.Parameter(torch.full((n_out, n_in), -3.0))"
_BIAS_RHO = "self.bias_rho = nn.Parameter(torch.full((n_out,), -3.0))"
_PRIOR = "pass"


def bayes(weight_rho: str = _WEIGHT_RHO, bias_rho: str = _BIAS_RHO,
          prior: str = _PRIOR) -> str:
    return BAYES.replace("WEIGHT_RHO", weight_rho).replace("BIAS_RHO", bias_rho) \
        .replace("PRIOR", prior)


NOISY = """\
import argparse
import math
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class NoisyLinear(nn.Linear):
    def __init__(self, in_features, out_features, sigma_init=0.017):
        super().__init__(in_features, out_features)
        self.sigma_weight = nn.Parameter(torch.full((out_features, in_features), sigma_init))
        self.register_buffer("epsilon_weight", torch.zeros(out_features, in_features))
        SIGMA_BIAS
        self.register_buffer("epsilon_bias", torch.zeros(out_features))

    def forward(self, x):
        self.epsilon_weight.normal_()
        self.epsilon_bias.normal_()
        bias = self.bias + self.sigma_bias * self.epsilon_bias.data
        return F.linear(x, self.weight + self.sigma_weight * self.epsilon_weight.data, bias)


q_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), NoisyLinear(32, 32), nn.ReLU(),
                      NoisyLinear(32, 2))
target_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), NoisyLinear(32, 32), nn.ReLU(),
                           NoisyLinear(32, 2))
target_net.load_state_dict(q_net.state_dict())
optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
states, next_states = torch.randn(32, 4), torch.randn(32, 4)
actions, rewards = torch.randint(0, 2, (32,)), torch.randn(32)
for step in range(6):
    q = q_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        target = rewards + 0.99 * target_net(next_states).max(1).values
    loss = F.mse_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 3 == 2:
        target_net.load_state_dict(q_net.state_dict())
if args.out:
    torch.save(q_net.state_dict(), args.out)
"""

_SIGMA_BIAS = "self.sigma_bias = nn.Parameter(torch.full((out_features,), sigma_init))"


def noisy(sigma_bias: str = _SIGMA_BIAS) -> str:
    return NOISY.replace("SIGMA_BIAS", sigma_bias)


SPECTRAL = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class SNLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight_orig = nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5)
        self.register_buffer("weight_u", F.normalize(torch.randn(n_out), dim=0))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        with torch.no_grad():
            v = F.normalize(self.weight_orig.t() @ self.weight_u, dim=0)
            u = F.normalize(self.weight_orig @ v, dim=0)
            self.weight_u.copy_(u)
        sigma = u @ self.weight_orig @ v
        return F.linear(x, self.weight_orig / sigma, self.bias)


critic = nn.Sequential(SNLinear(2, 16), nn.LeakyReLU(0.1), SNLinear(16, 1))
optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.999))
real, fake = torch.randn(32, 2) + 2, torch.randn(32, 2)
for step in range(6):
    loss = F.relu(1 - critic(real)).mean() + F.relu(1 + critic(fake)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(critic.state_dict(), args.out)
"""

BUGS = {
    # the bias's scale registered as a buffer, copied from a buffer's line
    "bias-rho-buffer": (
        bayes(), bayes(bias_rho='self.register_buffer("bias_rho", torch.full((n_out,), -3.0))'),
        "bias_rho"),
    # the weight's scale left a plain tensor (the nn.Parameter wrapper forgotten)
    "weight-rho-plain": (
        bayes(), bayes(weight_rho="self.weight_rho = torch.full((n_out, n_in), -3.0)"),
        "weight_rho"),
    # a noisy layer's bias scale registered as a buffer beside its noise
    "sigma-bias-buffer": (
        noisy(), noisy('self.register_buffer("sigma_bias", '
                       'torch.full((out_features,), sigma_init))'),
        "sigma_bias"),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_the_learned_tensor_is_named_and_made_a_parameter(tmp_path, case):
    published, buggy, tensor = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unlearned"], report["findings"]
    assert any(tensor in n for n in found[0]["names"]), found[0]["names"]
    assert found[0]["edits"], found[0]
    applied(folder, "unlearned", "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


GUARDS = {
    "bayes-as-published": bayes(),
    "noisy-as-published": noisy(),
    # a power-iteration vector kept as a buffer, written every forward, beside a learned weight
    "spectral-norm-vector": SPECTRAL,
    # a fixed prior for the weight and for the bias, both buffers
    "fixed-prior-buffers": bayes(prior='self.register_buffer("weight_prior_sigma", '
                                       'torch.ones(n_out, n_in)); '
                                       'self.register_buffer("bias_prior_sigma", '
                                       'torch.ones(n_out))'),
}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_buffers_that_are_meant_are_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
