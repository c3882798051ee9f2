"""A target network that is itself frozen, moved toward the online one by an EMA (SPR's target
encoder, a BYOL-style model that holds its own target), inside a model the script copies whole
for its TD target and loads again every few updates: the copy's target network is kept in sync
with the model's and never read, but the model's target network trains nothing (no tensor of
it requires grad), so reading it under no_grad is the method, not a target read from the
trained network: no finding. (A trained network read under no_grad while its kept copy is never
read is found in ``tests/lens/audit/test_audit_script_principles.py``.)"""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)
        self.predictor = nn.Linear(8, 8)
        self.target_encoder = copy.deepcopy(self.encoder)
        for p in self.target_encoder.parameters():
            p.requires_grad = False

    def forward(self, x):
        return self.head(self.encoder(x))


torch.manual_seed(0)
model = Model()
target_model = copy.deepcopy(model)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 4), torch.randn(32, 2)
for step in range(6):
    with torch.no_grad():
        bootstrap = target_model(x)
        targets = model.TARGET(x + 0.1)
    q_loss = F.mse_loss(model(x), y + 0.1 * bootstrap)
    spr_loss = F.mse_loss(model.predictor(model.encoder(x)), targets)
    optimizer.zero_grad()
    (q_loss + spr_loss).backward()
    optimizer.step()
    with torch.no_grad():
        for p, p_target in zip(model.encoder.parameters(), model.target_encoder.parameters()):
            p_target.copy_(0.9 * p_target + 0.1 * p)
    if step % 2 == 1:
        target_model.load_state_dict(model.state_dict())
"""


def test_a_frozen_target_network_read_under_no_grad_is_the_method(tmp_path):
    (tmp_path / "clean.py").write_text(SCRIPT.replace("TARGET", "target_encoder"))
    code, report = audit(tmp_path, tmp_path / "clean.py", "--watch", "1")
    assert code == 0, [f["message"] for f in failures(report)]

