"""``toolkit audit SCRIPT``, a tensor two optimizers hold, one of whose losses never reaches it:
InfoGAN's information optimizer is built over both networks (eriklindernoren/PyTorch-GAN,
implementations/infogan/infogan.py), and its loss never reaches the discriminator's
adversarial head, which the discriminator's own optimizer trains in the same iteration. At the
information step that head's ``.grad`` is ``None`` and the optimizer skips it: no ``dead``
finding. A generator cut from the information loss by a ``.detach()`` is still dead there,
though its own optimizer trained it too: the cut is the bug.
"""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_SCRIPT = """\\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
adv_head, code_head = nn.Linear(8, 1), nn.Linear(8, 2)
optimizer_G = torch.optim.Adam(generator.parameters(), lr=1e-3)
optimizer_D = torch.optim.Adam([*body.parameters(), *adv_head.parameters()], lr=1e-3)
optimizer_info = torch.optim.Adam([*generator.parameters(), *body.parameters(),
                                   *adv_head.parameters(), *code_head.parameters()], lr=1e-3)
for _ in range(3):
    real, z = torch.randn(8, 4), torch.randn(8, 3)
    optimizer_G.zero_grad()
    g_loss = F.softplus(-adv_head(body(generator(z)))).mean()
    g_loss.backward()
    optimizer_G.step()
    optimizer_D.zero_grad()
    fake = generator(z).detach()
    d_loss = (F.softplus(-adv_head(body(real))) + F.softplus(adv_head(body(fake)))).mean()
    d_loss.backward()
    optimizer_D.step()
    optimizer_info.zero_grad()
    code = torch.randn(8, 2)
    gen = generator(torch.cat([code, z[:, 2:]], 1)){cut}
    info_loss = F.mse_loss(code_head(body(gen)), code)
    info_loss.backward()
    optimizer_info.step()
"""


@pytest.mark.parametrize(("cut", "dead"), [("", False), (".detach()", True)],
                         ids=["as_published", "generator_detached"])
def test_a_tensor_another_optimizer_trains_is_not_dead_unless_a_cut_keeps_it(tmp_path, cut,
                                                                             dead):
    script = tmp_path / "infogan.py"
    script.write_text(_SCRIPT.format(cut=cut))
    code, report = audit(tmp_path, script)
    found = failures(report)
    if not dead:
        assert code == 0 and found == []
    else:
        assert code == 1 and [f["kind"] for f in found] == ["dead"]
        assert all(n.startswith("generator.") for n in found[0]["names"] if "." in n)
