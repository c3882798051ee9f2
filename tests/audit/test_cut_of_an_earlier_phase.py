"""A tensor no loss reaches in a later phase (an encoder's log-variance head, held by the
fine-tuning optimizer while the classifier reads only the mean) is not cut off by a
``.detach()`` the script made before that tensor's last step (the discriminator's cut of the
encoder's output in the adversarial phase, as BiGAN's training does): that cut kept nothing
from the fine-tuning loss. The tensors are an unused output (information), not ``dead`` at
the earlier cut; a detach made since their last step that cuts them off still is."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.mu = nn.Linear(8, 2)
        self.log_sigma = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.mu(h), self.log_sigma(h)


torch.manual_seed(0)
E = Encoder()
D = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
d_optimizer = torch.optim.Adam(D.parameters(), lr=0.01)
e_optimizer = torch.optim.Adam(E.parameters(), lr=0.01)
x = torch.randn(32, 4)
for it in range(3):
    mu, log_sigma = E(x)
    z = mu + log_sigma.exp() * torch.randn_like(mu)
    d_loss = F.softplus(-D(torch.cat([x, z.detach()], 1))).mean()
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    e_loss = F.softplus(D(torch.cat([x, z], 1))).mean()
    e_optimizer.zero_grad()
    e_loss.backward()
    e_optimizer.step()
classifier = nn.Linear(2, 3)
finetune = torch.optim.Adam([*E.parameters(), *classifier.parameters()], lr=0.01)
y = torch.randint(0, 3, (32,))
for step in range(3):
    mu, _ = E(MU_INPUT)
    loss = F.cross_entropy(classifier(mu), y)
    finetune.zero_grad()
    loss.backward()
    finetune.step()
"""


def test_a_cut_before_the_tensors_last_step_is_not_what_left_them_out(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("MU_INPUT", "x"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
    assert any(f["kind"] == "unused" and set(f["names"]) == {"E.log_sigma.weight",
                                                            "E.log_sigma.bias"}
               for f in report["findings"]), report["findings"]


def test_a_cut_since_their_last_step_still_is(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("    mu, _ = E(MU_INPUT)", "    mu, _ = E(x)\n"
                                     "    mu = mu.detach()"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    dead = [f for f in failures(report) if f["kind"] == "dead"]
    assert code == 1 and dead and any("E.mu.weight" in f["names"] for f in dead), \
        failures(report)
