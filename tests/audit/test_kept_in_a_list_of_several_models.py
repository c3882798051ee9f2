"""Modules kept in a plain list by one of several models an optimizer is built over,
``Adam([*encoder.parameters(), *decoder.parameters()])`` (GECO's VAE, Rezende & Viola 2018,
its encoder's two heads written ``self.heads = [...]`` for an ``nn.ModuleList``): the list is
found in the model that keeps it, and registered where it is made, as for an optimizer over
one model's ``parameters()``."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_VAE = """\
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.heads = {heads}

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.heads[0](h), self.heads[1](h)


torch.manual_seed(0)
encoder, decoder = Encoder(), nn.Linear(2, 4)
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-2)
for _ in range(3):
    x = torch.randn(16, 4)
    mu, log_var = encoder(x)
    z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
    loss = (x - decoder(z)).pow(2).sum(1).mean() + 0.5 * (mu.pow(2) + log_var.exp()).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("heads", "failed"), [
    ("[nn.Linear(8, 2), nn.Linear(8, 2)]", ["unstepped"]),
    ("nn.ModuleList([nn.Linear(8, 2), nn.Linear(8, 2)])", []),
], ids=["plain_list", "module_list"])
def test_a_list_kept_by_one_of_several_models_is_registered_where_it_is_made(
        tmp_path, heads, failed):
    script = tmp_path / "geco.py"
    script.write_text(_VAE.format(heads=heads))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert [f["kind"] for f in got] == failed, got
    assert code == (1 if failed else 0)
    if failed:
        assert got[0]["at"][0].startswith("geco.py:9: self.heads = [")
        assert "ModuleList([" in got[0]["edits"][0]["new"]
