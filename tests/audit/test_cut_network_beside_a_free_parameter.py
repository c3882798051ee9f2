"""A network's output cut off from a loss that trains no network, only a parameter of no
module (a GFlowNet's ``log_z``, Malkin et al. 2022, its trajectories' log-probabilities
sampled under ``no_grad``): the network the optimizer holds is no teacher, there is no
student's prediction for its output to be the target of; it is the part meant to train,
``dead``, with the edit that takes the call out of ``no_grad``. A teacher an optimizer holds
beside a student it trains is still information, and temperature scaling (a temperature
fitted on a frozen model's logits, the model in no optimizer) is clean."""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model, student = nn.Linear(4, 3), nn.Linear(4, 3)
log_z = nn.Parameter(torch.zeros(1))
optimizer = torch.optim.Adam({held}, lr=1e-2)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    with torch.no_grad():
        logits = model(x)
    loss = {loss}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("held", "loss", "failed", "noted"), [
    ("[*model.parameters(), log_z]",
     "(log_z + logits.log_softmax(-1).gather(1, y[:, None]) - 1.0).pow(2).mean()",
     ["dead"], []),
    ("[*model.parameters(), *student.parameters()]",
     "F.kl_div(student(x).log_softmax(-1), logits.softmax(-1), reduction='batchmean')",
     [], ["hand_updated"]),
    ("[log_z]", "F.cross_entropy(logits / log_z.exp(), y)", [], []),
], ids=["policy_cut_beside_log_z", "teacher_beside_a_student", "temperature_scaling"])
def test_a_network_cut_where_only_a_free_parameter_trains_is_dead(
        tmp_path, held, loss, failed, noted):
    script = tmp_path / "gflownet.py"
    script.write_text(_SCRIPT.format(held=held, loss=loss))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert [f["kind"] for f in got] == failed, got
    assert [f["kind"] for f in report["findings"] if not f["failure"]] == noted
    assert code == (1 if failed else 0)
    if failed:
        assert set(got[0]["names"]) == {"model.weight", "model.bias"}
        assert got[0]["values"] == ["logits"]
        assert got[0]["edits"], got[0]
