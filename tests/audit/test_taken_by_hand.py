"""A gradient the script takes itself with ``torch.autograd.grad`` over the tensors an optimizer
steps is audited as a backward over them (``test_principle_written_gradient_blind.py`` holds
the published methods). Here, what the step sees of it: however the script writes it into
``.grad`` (a new tensor, in place, through ``.data``, added to a backward's gradient of the
same iteration), the tensors hold this iteration's gradient when the optimizer steps, so no
gradient is stale and none is lost; a script with no ``backward()`` at all is audited (its
calls counted as its backward calls), and a target that carries gradient in such a loss is
found whichever way its gradient is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from script_audit import audit, failures

STEP = """\
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
params = list(net.parameters())
opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
for p in params:
    p.grad = torch.zeros_like(p)
for step in range(4):
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    target = {target}
    loss = F.mse_loss(net(x), target)
{before}    grads = torch.autograd.grad(loss, params)
    for p, g in zip(params, grads):
        {write}
    opt.step()
"""

#: each way of writing the gradient, with what runs before it in the iteration
WRITES = {
    "assigned": ("", "p.grad = g"),
    "copied-in-place": ("", "p.grad.copy_(g)"),
    "through-data": ("", "p.grad.data = g"),
    "a-new-tensor-made-from-it": ("", "p.grad = g.clamp(-1.0, 1.0)"),
    "added-after-zero-grad": ("    opt.zero_grad(set_to_none=False)\n", "p.grad.add_(g)"),
    "added-to-a-backward-of-the-iteration": (
        "    opt.zero_grad()\n    (0.1 * sum(p.pow(2).sum() for p in params)).backward()\n",
        "p.grad.add_(g)"),
}


def _script(tmp_path: Path, write: str, target: str = "y") -> Path:
    before, line = WRITES[write]
    script = tmp_path / "train.py"
    script.write_text(STEP.format(target=target, before=before, write=line), encoding="utf-8")
    return script


@pytest.mark.parametrize("write", list(WRITES))
def test_a_gradient_taken_and_written_by_hand_is_no_finding(tmp_path: Path, write: str) -> None:
    code, report = audit(tmp_path, _script(tmp_path, write))
    assert code == 0, [f["message"] for f in failures(report)]
    assert report["findings"] == [], [f["message"] for f in report["findings"]]


@pytest.mark.parametrize("write", ["assigned", "copied-in-place"])
def test_a_target_that_carries_gradient_is_found_however_the_gradient_is_written(
        tmp_path: Path, write: str) -> None:
    # the target made from the network's own output, uncut: a label the model guessed
    script = _script(tmp_path, write, target="y + 0.5 * net(x)")
    code, report = audit(tmp_path, script)
    assert code == 1
    kinds = {f["kind"] for f in failures(report)}
    assert kinds == {"target"}, [f["message"] for f in failures(report)]
    (found,) = failures(report)
    assert any(at.startswith("train.py:12:") for at in found["at"]), found["at"]


#: torch.autograd.grad called as scripts call it, beside a plain backward(): over a generator of
#: the parameters, over one GradientEdge (an intermediate's), from a GradientEdge of the output
CALLS = {
    "over-a-generator": "torch.autograd.grad(loss, net.parameters(), retain_graph=True)",
    "over-a-gradient-edge": "torch.autograd.grad(loss, get_gradient_edge(hidden), "
                            "retain_graph=True)",
    "of-a-gradient-edge": "torch.autograd.grad(get_gradient_edge(loss), params, "
                          "grad_outputs=torch.ones(()), retain_graph=True)",
}

BESIDE = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import get_gradient_edge
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
params = list(net.parameters())
opt = torch.optim.SGD(params, lr=0.1)
for step in range(3):
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    hidden = net[0](x)
    loss = F.mse_loss(net[2](net[1](hidden)), y)
    norms = [g.norm() for g in {call}]
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, [round(n.item(), 4) for n in norms])
"""


@pytest.mark.parametrize("call", list(CALLS))
def test_each_way_of_calling_it_runs_as_it_runs_unaudited(tmp_path: Path, call: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(BESIDE.format(call=CALLS[call]), encoding="utf-8")
    code, report = audit(tmp_path, script)
    assert code == 0, [f["message"] for f in report["findings"]]
    assert failures(report) == []


def test_the_summary_counts_the_calls_taken_by_hand_apart(tmp_path: Path, capsys) -> None:
    audit(tmp_path, _script(tmp_path, "added-to-a-backward-of-the-iteration"))
    out = capsys.readouterr().out
    assert "; 4 backward() calls and 4 torch.autograd.grad calls over stepped tensors, " \
           "4 optimizer steps" in out, out


#: a sharpness-aware step (Foret et al., "Sharpness-Aware Minimization", ICLR 2021,
#: arXiv:2010.01412, Algorithm 1): the first gradient taken by hand only to move the weights to
#: the worst nearby point, the step's gradient from a backward() there, the weights moved back
SHARPNESS_AWARE = """\
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
params = list(net.parameters())
opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
for step in range(5):
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    grads = torch.autograd.grad(F.cross_entropy(net(x), y), params)
    norm = torch.norm(torch.stack([g.norm() for g in grads]))
    eps = [0.05 * g / (norm + 1e-12) for g in grads]
    with torch.no_grad():
        for p, e in zip(params, eps):
            p.add_(e)
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    with torch.no_grad():
        for p, e in zip(params, eps):
            p.sub_(e)
    opt.step()
"""


@pytest.mark.parametrize("options", [(), ("--watch", "1")], ids=["steps", "every-iteration"])
def test_a_gradient_taken_only_to_move_the_weights_is_no_finding(
        tmp_path: Path, options: tuple[str, ...]) -> None:
    script = tmp_path / "train.py"
    script.write_text(SHARPNESS_AWARE, encoding="utf-8")
    code, report = audit(tmp_path, script, *options)
    assert code == 0 and report["findings"] == [], [f["message"] for f in report["findings"]]
