"""Values selected by indices made from cut values are not computed from them: NNCLR's
positive is the row of a support set nearest to the projection cut from the graph, and the
loss compares it, through a softmax over keys, with the other view's prediction. The cut decides
which row, and ``argmax`` passes no gradient whatever the cut, so these keys are not cut keys
(no finding); where the keys are the cut projections themselves (SimCLR's second view
detached), they are."""

from __future__ import annotations

from pathlib import Path

from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
predictor = nn.Linear(4, 4)
optimizer = torch.optim.SGD([*net.parameters(), *predictor.parameters()], lr=0.1)
bank = F.normalize(torch.randn(32, 4), dim=1)
x = torch.randn(16, 6)
for step in range(3):
    z0 = net(x + 0.1 * torch.randn_like(x))
    p1 = predictor(net(x + 0.1 * torch.randn_like(x)))
    z0 = z0.detach()
    KEYS
    logits = F.normalize(keys, dim=1) @ F.normalize(p1, dim=1).T / 0.1
    loss = F.cross_entropy(logits, torch.arange(16))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _run(tmp_path: Path, keys: str) -> tuple[int, dict]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("KEYS", keys), encoding="utf-8")
    return audit(tmp_path, script, "--steps", "2")


def test_the_nearest_row_of_a_support_set_is_no_cut_key(tmp_path):
    code, report = _run(tmp_path, "keys = bank[(F.normalize(z0, dim=1) @ bank.T).argmax(dim=1)]")
    assert code == 0 and not failures(report)


def test_the_cut_projection_itself_as_keys_is_cut_keys(tmp_path):
    code, report = _run(tmp_path, "keys = z0")
    assert code == 1 and [f["kind"] for f in failures(report)] == ["cut_keys"]
