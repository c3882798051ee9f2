"""A module's own weights read under ``no_grad`` inside its forward, and the forward going on
from what the block made: GRU-D (Che et al. 2018; PeterChe1990/GRU-D ``GRUDCell.call``) decays
each missing input towards the variable's mean with a learnt input decay, ``gamma_x =
exp(-relu(delta * w_gx + b_gx))``. Computed under ``torch.no_grad()``, as if it were the data's
preprocessing, the decay's weights get no gradient while the optimizer holds them: ``dead``,
named at the block, whose edit takes its ``with`` away whole (the imputation after it reads the
decay, and would cut it again) and trains as the published script. A weight clamped in place
under ``no_grad``, or read there for a value nothing reads on, is no such cut."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

from toolkit.audit.fixes.switch_edits import out_of_no_grad

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Decayed(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(3))
        self.b = nn.Parameter(torch.zeros(3))
        self.head = nn.Linear(3, 1)

    def forward(self, x, delta):
BLOCK
        return self.head(x_hat).squeeze(-1)


net = Decayed()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(4):
    x, delta, y = torch.randn(16, 3), torch.rand(16, 3), torch.randn(16)
    loss = ((net(x, delta) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""

COMPUTED = """\
        gamma = torch.exp(-torch.relu(delta * self.w + self.b))
        x_hat = gamma * x
"""
PUBLISHED = SCRIPT.replace("BLOCK\n", COMPUTED)
CUT = SCRIPT.replace("BLOCK\n", "        with torch.no_grad():\n" + "".join(
    "    " + line + "\n" for line in COMPUTED.splitlines()))


@pytest.mark.slow
def test_weights_cut_in_their_forward_are_dead_at_the_block_and_the_edit_trains(tmp_path):
    folder = twins(tmp_path, PUBLISHED, CUT)
    done = applied_and_trains(folder, "dead")
    line = CUT.splitlines().index("        with torch.no_grad():") + 1
    assert f"at:   train.py:{line}: with torch.no_grad():" in done.stdout, done.stdout
    assert "the block `with torch.no_grad():`" in done.stdout, done.stdout
    assert (folder / "train.py").read_text() == PUBLISHED


CLAMPED = SCRIPT.replace("BLOCK\n", """\
        with torch.no_grad():
            self.w.clamp_(0.0, 1.0)
        x_hat = torch.exp(-torch.relu(delta * self.w + self.b)) * x
""")
# a value read off the weights under no_grad that nothing reads on: the weights train
LOGGED = SCRIPT.replace("BLOCK\n", """\
        with torch.no_grad():
            self.last_norm = (self.w * self.w).sum()
        x_hat = torch.exp(-torch.relu(delta * self.w + self.b)) * x
""")


@pytest.mark.parametrize("script", [CLAMPED, LOGGED], ids=["clamped", "logged"])
def test_weights_written_or_read_aside_under_no_grad_are_clean(tmp_path, script):
    path = tmp_path / "train.py"
    path.write_text(script, encoding="utf-8")
    code, report = audit(tmp_path, path, "--steps", "2")
    assert code == 0 and not failures(report), [f["message"] for f in report["findings"]]


def test_a_statement_whose_result_the_block_reads_on_takes_the_whole_block_out(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(CUT, encoding="utf-8")
    line = CUT.splitlines().index("        with torch.no_grad():") + 1
    moved = out_of_no_grad(str(path), line + 1)
    assert moved is not None and moved[0] == line
    # a block whose later statement reads nothing of it keeps the old edit: the first goes
    # before the with, the rest stays cut
    apart = tmp_path / "apart.py"
    apart.write_text(CUT.replace("x_hat = gamma * x", "x_hat = 2 * x"), encoding="utf-8")
    moved = out_of_no_grad(str(apart), line + 1)
    assert moved is not None and moved[0] == line + 1
