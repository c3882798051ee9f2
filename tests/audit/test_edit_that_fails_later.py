"""An edit is verified over as much of the run as the first audit saw. A generator whose
adversarial loss reads a history pool's detached fakes trains nothing through that term (a
``constant_term``), and its edit removes the pool's cut; the audited iterations run, but the
pool then hands back a fake from an earlier iteration with its graph, freed by that
iteration's backward, and the script fails. The edited script is run on, unaudited, as far as
the script ran, so the edit is not verified and ``--apply`` writes nothing."""

from __future__ import annotations

import pytest
from script_audit import cli

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Pool:
    def __init__(self, size):
        self.size, self.images = size, []

    def query(self, images):
        images = images.detach()
        if len(self.images) < self.size:
            self.images.append(images)
            return images
        old, self.images = self.images[0], [*self.images[1:], images]
        return old


G, D = nn.Linear(3, 3), nn.Linear(3, 1)
opt_G = torch.optim.Adam(G.parameters(), lr=0.01)
opt_D = torch.optim.Adam(D.parameters(), lr=0.01)
pool = Pool(2)
for step in range(6):
    real, noise = torch.randn(8, 3) + 1, torch.randn(8, 3)
    fake = G(noise)
    pooled = pool.query(fake)
    D.requires_grad_(False)
    loss_G = F.softplus(-D(pooled)).mean() + 0.1 * fake.pow(2).mean()
    opt_G.zero_grad()
    loss_G.backward()
    opt_G.step()
    D.requires_grad_(True)
    loss_D = F.softplus(-D(real)).mean() + F.softplus(D(pooled.detach())).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
"""


def test_an_edit_that_fails_after_the_audited_iterations_is_not_written(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    done = cli("--watch", "1", "--apply", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL    constant_term:" in done.stdout, done.stdout
    assert "not verified: the edited script fails: RuntimeError" in done.stdout, done.stdout
    assert "wrote train.py" not in done.stdout
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == SCRIPT
