"""A learnt initial state kept as a plain tensor that requires grad (``self.h_0 =
torch.zeros(..., requires_grad=True)``) by a model whose loss is a method of its own, not its
forward: the deep Markov model (Krishnan et al. 2017; pyro-ppl/pyro examples/dmm/dmm.py makes
``h_0`` an ``nn.Parameter``) computes its ELBO in ``neg_elbo``, which calls the model's modules
but never the model. Torch does not register the tensor, the optimizer built over the model's
parameters never holds it, and the loss trains it: ``unstepped``, named at the line that makes
it, once, with the edit that makes it a parameter there, which trains as the published
script."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(3, 4, batch_first=True)
        self.head = nn.Linear(4, 1)
        STATE

    def neg_elbo(self, x, y):
        h_0 = self.h_0.expand(1, x.size(0), 4).contiguous()
        out, _ = self.rnn(x, h_0)
        return ((self.head(out[:, -1]) - y) ** 2).mean()


model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    x, y = torch.randn(8, 5, 3), torch.randn(8, 1)
    loss = model.neg_elbo(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

PUBLISHED = SCRIPT.replace("STATE", "self.h_0 = nn.Parameter(torch.zeros(1, 1, 4))")
PLAIN = SCRIPT.replace("STATE", "self.h_0 = torch.zeros(1, 1, 4, requires_grad=True)")


def test_a_plain_state_of_a_model_whose_loss_is_a_method_is_unstepped_once(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(PLAIN, encoding="utf-8")
    code, report = audit(tmp_path, path, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert code == 1 and len(found) == 1, [f["message"] for f in failures(report)]
    line = PLAIN.splitlines().index("        self.h_0 = torch.zeros(1, 1, 4, requires_grad=True)")
    assert found[0]["at"][0].startswith(f"train.py:{line + 1}:"), found[0]["at"]
    assert "model.h_0" in found[0]["names"], found[0]["names"]


def test_its_edit_makes_it_a_parameter_and_trains_as_published(tmp_path):
    folder = twins(tmp_path, PUBLISHED, PLAIN)
    applied_and_trains(folder, "unstepped", "--watch", "1")
    assert (folder / "train.py").read_text() == PUBLISHED
