"""A finding about a cut names the value the cut makes, as the script calls it, in its
``values``, apart from the tensors it keeps from the loss (its ``names``): a term made only of
a network's output ``.detach()``-ed (FreeMatch's fairness mean, Wang et al. 2023) names that
mean, made in a helper too, and a network's call under ``no_grad`` whose stepped tensors no
loss reaches names the output it binds."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
head = nn.Linear(3, 3)
optimizer = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
for step in range(3):
BODY    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

CONSTANT = """\
    mean_prob = F.softmax(head(model(x)), 1).mean(0).detach()
    fairness = (mean_prob * mean_prob.log()).sum()
    loss = F.cross_entropy(head(model(x)), y) + fairness
"""

HELPER = """\
    def fairness(logits):
        mean_prob = F.softmax(logits, 1).mean(0).detach()
        return (mean_prob * mean_prob.log()).sum()
    loss = F.cross_entropy(head(model(x)), y) + fairness(head(model(x)))
"""

DEAD = """\
    with torch.no_grad():
        features = model(x)
    loss = F.cross_entropy(head(features), y)
"""


@pytest.mark.parametrize(("body", "kind", "value"), [
    (CONSTANT, "constant_term", "mean_prob"), (HELPER, "constant_term", "mean_prob"),
    (DEAD, "dead", "features")],
    ids=["constant_term", "constant_term_in_a_helper", "dead"])
def test_the_value_a_cut_makes_is_named(tmp_path, body, kind, value):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("BODY", body), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == kind]
    assert code == 1 and found, report["findings"]
    assert value in found[0]["values"], found[0]["values"]
    assert value not in found[0]["names"], found[0]["names"]
    assert any(n.startswith("model.") for n in found[0]["names"]), found[0]["names"]
