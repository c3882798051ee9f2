"""``cleared`` is gradient lost to a clear before any step: not the part of a loss that another
optimizer's step came after. A GAN step in the order of PyTorch-GAN's scripts
(eriklindernoren/PyTorch-GAN, implementations/gan/gan.py): the generator's loss backward, its
step, then the discriminator's ``zero_grad()``, which drops what that loss wrote into the
discriminator. With the generator cut off by a ``.detach()`` (a ``dead`` failure) its step
finds no gradient, and the discriminator's part is still no lost update: one failure, ``dead``,
whose edit alone trains as the published script."""

from __future__ import annotations

from pathlib import Path

from toolkit.audit.cli import main
from toolkit.audit.verify.rerun import load_record

GAN = """\
import torch
from torch import nn
torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
discriminator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for _ in range(4):
    real = torch.randn(16, 2) + 2
    fake = generator(torch.randn(16, 2))
    opt_g.zero_grad()
    g_loss = bce(discriminator({fake}), torch.ones(16, 1))
    g_loss.backward()
    opt_g.step()
    opt_d.zero_grad()
    d_loss = bce(discriminator(real), torch.ones(16, 1)) + \\
        bce(discriminator(fake.detach()), torch.zeros(16, 1))
    d_loss.backward()
    opt_d.step()
"""


def _failures(tmp_path: Path, fake: str) -> list[dict]:
    script = tmp_path / "gan.py"
    script.write_text(GAN.format(fake=fake), encoding="utf-8")
    rec = tmp_path / "record"
    main(["--no-verify", "--record", str(rec), str(script)])
    report, _ = load_record(str(rec))
    return [f for f in report["findings"] if f["failure"]]


def test_the_published_order_is_clean(tmp_path):
    assert _failures(tmp_path, "fake") == []


def test_a_dead_generator_is_one_failure_not_a_lost_update(tmp_path):
    failures = _failures(tmp_path, "fake.detach()")
    assert [f["kind"] for f in failures] == ["dead"]
    # the tensors, and the value the cut makes, as the script names it
    assert all(n.startswith("generator.") for n in failures[0]["names"] if "." in n)
