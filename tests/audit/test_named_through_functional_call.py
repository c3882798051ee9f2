"""A network the script runs only through ``torch.func.functional_call`` (an unrolled GAN's
discriminator, Metz et al. 2017, called with the weights of its unrolled steps and with its
own) shows no call of its module by a name: its tensors are named by the name the script holds
it by (``D.0.weight``), not by the optimizer's keys, in the finding that concerns them."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

torch.manual_seed(0)
G = nn.Linear(2, 2)
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
g_optimizer = torch.optim.SGD(G.parameters(), lr=0.1)
d_optimizer = torch.optim.SGD(D.parameters(), lr=0.1)
for it in range(3):
    fake = G(torch.randn(8, 2))
    g_loss = F.softplus(-functional_call(D, dict(D.named_parameters()), (fake,))).mean()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    real = torch.randn(8, 2) + 2
    d_loss = (F.softplus(-functional_call(D, dict(D.named_parameters()), (real,))).mean()
              + F.softplus(functional_call(D, dict(D.named_parameters()), (fake.detach(),))).mean())
    d_loss.backward()
    d_optimizer.step()
    d_optimizer.zero_grad()
"""


def test_the_discriminators_tensors_are_named_by_the_name_that_holds_it(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    leaks = [f for f in failures(report) if f["kind"] == "leak"]
    assert code == 1 and leaks, failures(report)
    assert set(leaks[0]["names"]) == {"D.0.weight", "D.0.bias", "D.2.weight", "D.2.bias"}
