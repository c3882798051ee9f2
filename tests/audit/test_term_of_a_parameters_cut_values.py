"""A term of a loss computed from a stepped parameter's own values read through a cut of the
parameter itself (``p.data``, ``p.detach()``): the term is a constant, its value in the loss and
none of its gradient. The scaling layer of NICE (Dinh et al. 2015, arXiv:1410.8516, section 3.3:
the log-determinant of the diagonal scaling is ``sum(S)``, differentiated with the rest of the
log-likelihood) written with ``self.log_scale.data`` keeps the scales at their start; an L2
penalty summed from ``torch.norm(p.data)`` (a known mistake: the penalty shows in the loss and
trains nothing) leaves the weights unregularised.

Guards: both as published; a straight-through quantisation of a layer's weight
(``w + (round(w.detach()) - w.detach())``, the cut values added to the live weight); a proximal
term against a snapshot of the weights taken in the same iteration (FedProx, Li et al. 2020:
``(p - p0) ** 2`` with ``p0 = p.detach().clone()``, the live weight beside the cut); and VQ-VAE's
commitment term against the detached codebook rows (the encoder's output beside them)."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import math
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
"""

NICE = HEAD + """

class Coupling(nn.Module):
    def __init__(self, flip):
        super().__init__()
        self.flip = flip
        self.net = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        a, b = x.chunk(2, -1)
        if self.flip:
            a, b = b, a
        b = b + self.net(a)
        return torch.cat([b, a] if self.flip else [a, b], -1)


class Nice(nn.Module):
    def __init__(self):
        super().__init__()
        self.couplings = nn.ModuleList([Coupling(i % 2 == 1) for i in range(4)])
        self.log_scale = nn.Parameter(torch.zeros(4))

    def forward(self, x):
        for coupling in self.couplings:
            x = coupling(x)
        return x * torch.exp(self.log_scale), LOGDET


model = Nice()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
data = torch.randn(64, 4) * torch.tensor([0.5, 2.0, 1.0, 3.0])
for step in range(5):
    z, log_det = model(data)
    log_prior = -0.5 * (z ** 2 + math.log(2 * math.pi)).sum(-1)
    loss = -(log_prior + log_det).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

L2 = HEAD + """
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 10), torch.randint(3, (64,))
for step in range(5):
    loss = F.cross_entropy(model(x), y)
    l2 = sum(torch.norm(PARAM) for name, p in model.named_parameters() if "weight" in name)
    loss = loss + 1e-2 * l2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

BUGS = {
    "nice-scaling-log-det": (NICE.replace("LOGDET", "self.log_scale.sum()"),
                             NICE.replace("LOGDET", "self.log_scale.data.sum()"), "log_scale"),
    "l2-penalty-of-data": (L2.replace("PARAM", "p"), L2.replace("PARAM", "p.data"), "weight"),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_term_of_a_parameters_cut_values_is_named_and_uncut(tmp_path, case):
    published, buggy, tensor = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["constant_term"], report["findings"]
    assert any(tensor in n for n in found[0]["names"]), found[0]["names"]
    applied(folder, "constant_term", "--watch", "1")
    assert (folder / "train.py").read_text(encoding="utf-8") == published
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


STRAIGHT_THROUGH = HEAD + """

class QuantLinear(nn.Linear):
    def forward(self, x):
        w = self.weight
        q = w + (torch.round(w.detach() * 8) / 8 - w.detach())
        return F.linear(x, q, self.bias)


model = nn.Sequential(QuantLinear(10, 32), nn.ReLU(), QuantLinear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 10), torch.randint(3, (64,))
for step in range(5):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

FEDPROX = HEAD + """
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
clients = [(torch.randn(32, 10), torch.randint(3, (32,))) for _ in range(3)]
for round_ in range(4):
    x, y = clients[round_ % 3]
    anchor = [p.detach().clone() for p in model.parameters()]
    loss = F.cross_entropy(model(x), y)
    prox = sum(((p - p0) ** 2).sum() for p, p0 in zip(model.parameters(), anchor))
    loss = loss + 0.05 * prox
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

VQ = HEAD + """
encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
decoder = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
codebook = nn.Embedding(10, 4)
params = [*encoder.parameters(), *decoder.parameters(), *codebook.parameters()]
optimizer = torch.optim.Adam(params, lr=1e-2)
x = torch.randn(64, 8)
for step in range(5):
    z = encoder(x)
    index = torch.cdist(z, codebook.weight.detach()).argmin(-1)
    e = codebook.weight[index]
    commitment = F.mse_loss(z, codebook.weight.detach()[index])
    codebook_loss = F.mse_loss(e, z.detach())
    quantised = z + (e - z).detach()
    loss = F.mse_loss(decoder(quantised), x) + codebook_loss + 0.25 * commitment
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

GUARDS = {"nice-as-published": BUGS["nice-scaling-log-det"][0],
          "l2-as-published": BUGS["l2-penalty-of-data"][0],
          "straight-through-weights": STRAIGHT_THROUGH, "fedprox-anchor": FEDPROX,
          "vq-commitment": VQ}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_parameters_cut_values_beside_live_values_are_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
