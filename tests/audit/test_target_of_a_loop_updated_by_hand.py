"""A target that carries gradient, in a loop that updates the weights by hand (no torch
optimizer): found by the script mode's own target rule, the parameters the loss reaches
standing for the stepped ones, and named as the script holds it (``target``), at the line
that makes it, with the edit that cuts it there.

The loop is consistency training written by hand (a weak view's prediction as the soft
target of a strong view's, as FixMatch's and UDA's are, Sohn et al. 2020, Xie et al. 2020),
its SGD update ``p -= lr * p.grad``; the bug computes the target with its graph."""

from __future__ import annotations

from script_audit import audit, cli, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
weak, strong = torch.randn(16, 4), torch.randn(16, 4)
for step in range(3):
    target = F.softmax(model(weak), dim=-1)
    loss = F.cross_entropy(model(strong), target)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
            p.grad = None
"""


def test_the_target_is_named_as_the_script_holds_it(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["target"], report["findings"]
    assert found[0]["names"][0] == "target", found[0]["names"]
    assert {"model.weight", "model.bias"} <= set(found[0]["names"])
    assert any(a.startswith("train.py:9:") for a in found[0]["at"]), found[0]["at"]
    assert "the script updates itself" in found[0]["message"]


def test_its_edit_cuts_the_target_where_it_is_made(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    assert cli("--watch", "1", "--apply", "train.py", cwd=tmp_path).returncode == 1
    edited = script.read_text(encoding="utf-8")
    assert edited.count(".detach()") == 1 and "target = " in edited, edited
    assert cli("--watch", "1", "train.py", cwd=tmp_path).returncode == 0
