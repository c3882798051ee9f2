"""What ``--record`` keeps of a loop that updates the weights by hand: one ``grads.pt`` entry per
audited iteration, marked ``hand``, with the gradients the iteration's ``backward()`` left by the
tensors' names, and whether the step audit's rules saw its loss (from the second iteration on:
no optimizer's construction begins the recording). A loop that steps an optimizer keeps its
entries per step, none marked."""

from __future__ import annotations

import torch
from script_audit import audit

BY_HAND = """\
import torch

torch.manual_seed(0)
w = torch.zeros(3, requires_grad=True)
x, y = torch.randn(16, 3), torch.randn(16)
for it in range(4):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
"""


def test_each_iteration_updated_by_hand_is_recorded_with_its_gradient(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BY_HAND, encoding="utf-8")
    code, _ = audit(tmp_path, script, "--steps", "3")
    assert code == 0
    grads = torch.load(tmp_path / "record-train" / "grads.pt", weights_only=True)
    assert [(g["iteration"], g["hand"], g["optimizer"]) for g in grads] == [
        (0, True, None), (1, True, None), (2, True, None)]
    assert [g["judged"] for g in grads] == [False, True, True]
    # the gradient of the mean squared error at the weights each iteration started from
    torch.manual_seed(0)
    w = torch.zeros(3)
    x, y = torch.randn(16, 3), torch.randn(16)
    for g in grads:
        want = 2 * x.T @ (x @ w - y) / len(y)
        assert set(g["grads"]) == {"w"} and g["names"] == {"w": "w"}
        assert torch.allclose(g["grads"]["w"], want, atol=1e-6)
        w = w - 0.1 * want


def test_a_loop_that_steps_an_optimizer_marks_no_entry_as_by_hand(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BY_HAND.replace(
        "w = torch.zeros(3, requires_grad=True)\n",
        "w = torch.zeros(3, requires_grad=True)\nopt = torch.optim.SGD([w], lr=0.1)\n").replace(
        "    with torch.no_grad():\n        w -= 0.1 * w.grad\n        w.grad.zero_()\n",
        "    opt.step()\n    opt.zero_grad()\n"), encoding="utf-8")
    code, _ = audit(tmp_path, script, "--steps", "3")
    assert code == 0
    grads = torch.load(tmp_path / "record-train" / "grads.pt", weights_only=True)
    assert len(grads) == 3 and not any(g.get("hand") for g in grads)
