"""A discriminator switched off for the generator's step and never back on, its own step a plain
statement of the loop's body (SAGAN's trainer, after heykeetae/Self-Attention-GAN's
``Trainer.train`` with the toggle of ajbrock/BigGAN-PyTorch's ``toggle_grad``): the edit switches
it back on at the top of the loop's body, before the forward of its own loss, not right before
its step, which comes after the backward() that should have trained it (its loss reads the
fake batch with its graph, as SAGAN's does, so it still has one). Followed, the edit
trains as the published script and a second audit is clean."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, audit, cli, failures, twins

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
g_optimizer = torch.optim.Adam(G.parameters(), lr=1e-2)
d_optimizer = torch.optim.Adam(D.parameters(), lr=1e-2)
real = torch.randn(64, 2) + 2.0
for step in range(4):
    SWITCH
    fake = G(torch.randn(64, 2))
    d_loss = F.relu(1.0 - D(real)).mean() + F.relu(1.0 + D(fake)).mean()
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    D.requires_grad_(False)
    g_loss = -D(G(torch.randn(64, 2))).mean()
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
if args.out:
    torch.save({"G": G.state_dict(), "D": D.state_dict()}, args.out)
"""


def test_a_network_left_frozen_is_switched_on_at_the_top_of_the_loop(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("SWITCH", "D.requires_grad_(True)"),
                   SCRIPT.replace("    SWITCH\n", ""))
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["frozen"], report["findings"]
    (edit,) = found[0]["edits"]
    assert edit["start"][0] == 16 and edit["new"].strip() == "D.requires_grad_(True)", edit
    applied(folder, "frozen", "--watch", "1")
    lines = (folder / "train.py").read_text().splitlines()
    assert lines[15:17] == ["    D.requires_grad_(True)", "    fake = G(torch.randn(64, 2))"]
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
