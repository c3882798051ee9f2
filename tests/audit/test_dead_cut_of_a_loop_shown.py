"""A cut that holds a loop (a helper that runs an ensemble's members under ``torch.no_grad()``,
as GrowNet's fixed ensemble does) is shown by the loop's header, not by an empty statement."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
nets = [nn.Linear(3, 1) for _ in range(2)]
scale = nn.Parameter(torch.ones(1))
opt = torch.optim.SGD([scale, *[p for m in nets for p in m.parameters()]], lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)


def ensemble(x):
    out = 0.0
    with torch.no_grad():
        for m in nets:
            out = out + m(x)
    return scale * out


for it in range(3):
    loss = (ensemble(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_cut_around_a_loop_is_shown_by_the_loops_header(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script)
    (dead,) = failures(report)
    assert code == 1 and dead["kind"] == "dead"
    assert "`for m in nets:` under `with torch.no_grad()` at train.py:14" in dead["message"]
    assert "``" not in dead["message"]
