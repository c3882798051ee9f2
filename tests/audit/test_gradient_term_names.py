"""A term of the loss made from a gradient taken without ``create_graph=True`` names, in the
script mode, the tensors it would train: SIREN (Sitzmann et al. 2020, arXiv:2006.09661;
vsitzmann/siren, ``diff_operators.gradient`` and ``loss_functions.gradients_mse``) fits an
image and its gradient field, the second loss read from ``torch.autograd.grad`` of the network's
output with respect to its input. Without ``create_graph=True`` that gradient is a constant and
its loss trains nothing; the finding lists the network's tensors, as the step audit's does,
so that a reader (and ``--record``'s ``names``) sees what the term was meant to train."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
coords = torch.rand(64, 2) * 2 - 1
image = torch.sin(3 * coords[:, :1]) * torch.cos(2 * coords[:, 1:])
field = torch.cat([3 * torch.cos(3 * coords[:, :1]) * torch.cos(2 * coords[:, 1:]),
                   -2 * torch.sin(3 * coords[:, :1]) * torch.sin(2 * coords[:, 1:])], 1)
for step in range(3):
    x = coords.clone().requires_grad_(True)
    y = model(x)
    grads = torch.autograd.grad(y, [x], torch.ones_like(y), retain_graph=True)[0]
    loss = (y - image).pow(2).mean() + 0.1 * (grads - field).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_the_gradient_term_names_the_tensors_it_would_train(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    code, report = audit(tmp_path, script)
    found = [f for f in failures(report) if f["kind"] == "constant_term"]
    assert code == 1 and found, [f["message"] for f in report["findings"]]
    assert {"model.0.weight", "model.2.bias"} <= set(found[0]["names"]), found[0]["names"]
    assert any(at.startswith("train.py:14:") for at in found[0]["at"]), found[0]["at"]
