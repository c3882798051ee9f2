"""A sample drawn without its path (``drawn``): ``Distribution.sample()`` draws under
``no_grad``. A VAE whose latent is drawn so (BCQ's VAE, a neural process's latent path) trains
its encoder by the KL term alone: the reconstruction's gradient never reaches the mean and the
scale. The edit writes ``rsample`` (the reparameterisation trick, Kingma and Welling 2014),
after which the script trains as the published one; so too where the decoder has no weights (the
variational graph auto-encoder's inner product, Kipf and Welling 2016), so that the sample
reaches the loss only as the single number of its term. A draw weighed by its log-probability
(REINFORCE), drawn from parameters with no graph (exploration noise) or under ``no_grad``
is the method's: no finding."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, failures

pytestmark = pytest.mark.slow

VAE = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
encoder, decoder = nn.Linear(6, 4), nn.Linear(2, 6)
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
x = torch.randn(32, 6)
for step in range(3):
    mean, log_std = encoder(x).chunk(2, dim=1)
    z = torch.distributions.Normal(mean, log_std.exp()).DRAW()
    kl = (mean ** 2 + (2 * log_std).exp() - 2 * log_std - 1).sum(1).mean() / 2
    loss = F.mse_loss(decoder(z), x) + 0.1 * kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({**encoder.state_dict(), **{"d." + k: v for k, v in decoder.state_dict().items()}},
               args.out)
"""
# the variational graph auto-encoder's decoder: the inner product of the latents, no weights
# (Kipf & Welling 2016, arXiv:1611.07308; tkipf/gae, gae/model.py, InnerProductDecoder)
GRAPH_VAE = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
encoder = nn.Linear(8, 4)
optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
features, adj = torch.randn(8, 8), (torch.rand(8, 8) < 0.3).float()
for step in range(3):
    mean, log_std = encoder(features).chunk(2, dim=1)
    z = torch.distributions.Normal(mean, log_std.exp()).DRAW()
    recon = F.binary_cross_entropy_with_logits(z @ z.t(), adj)
    kl = (mean ** 2 + (2 * log_std).exp() - 2 * log_std - 1).sum(1).mean() / 2
    loss = recon + 0.1 * kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(encoder.state_dict(), args.out)
"""

REINFORCE = """\
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Linear(3, 2)
optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
for step in range(3):
    s = torch.randn(16, 3)
    mean, log_std = policy(s).unbind(1)
    dist = torch.distributions.Normal(mean, log_std.exp())
    a = dist.sample()
    reward = -(a - 1.0) ** 2
    loss = -(dist.log_prob(a) * (reward - reward.mean())).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

NOISE = """\
import torch
from torch import nn

torch.manual_seed(0)
actor = nn.Linear(3, 2)
critic = nn.Linear(5, 1).requires_grad_(False)
optimizer = torch.optim.SGD(actor.parameters(), lr=1e-2)
noise = torch.distributions.Normal(torch.zeros(2), 0.1 * torch.ones(2))
for step in range(3):
    s = torch.randn(16, 3)
    a = actor(s) + noise.sample((16,))
    with torch.no_grad():
        b = torch.distributions.Normal(actor(s), 1.0).sample()
    loss = -critic(torch.cat([s, a], 1)).mean() + 0.0 * b.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_latent_drawn_with_sample_is_drawn_at_its_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(VAE.replace("DRAW", "sample"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--steps", "2")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["drawn"], found
    assert found[0]["at"][0].startswith("train.py:15: z = ")
    assert found[0]["names"][0] == "z"
    assert {"encoder.weight", "encoder.bias"} <= set(found[0]["names"])


@pytest.mark.parametrize("text", [VAE, GRAPH_VAE], ids=["decoder", "inner-product"])
def test_the_edit_draws_with_rsample_and_trains_as_published(tmp_path, text):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(text.replace("DRAW", "rsample"), encoding="utf-8")
    (folder / "train.py").write_text(text.replace("DRAW", "sample"), encoding="utf-8")
    assert audit(tmp_path, folder / "published.py", "--steps", "2")[0] == 0
    applied(folder, "drawn", "--steps", "2")
    assert ".rsample()" in (folder / "train.py").read_text(encoding="utf-8")
    assert_trains_as(folder)


@pytest.mark.parametrize("text", [REINFORCE, NOISE], ids=["log_prob", "noise_and_no_grad"])
def test_a_draw_the_method_means_is_no_finding(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
