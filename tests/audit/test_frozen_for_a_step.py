"""A freeze made for one loss's step and never undone: TD-MPC freezes its Q networks with a
method of the model (``model.track_q_grad(False)``) for the policy's loss, and switches them
back on after the policy's step (Hansen et al. 2022); without that, the model's optimizer
steps them with no gradient from the next update on. ``frozen`` names them, and its edit makes
the same call with ``True`` after the step that follows the freeze in its block, so that the
fixed script trains as the published one. Where the block steps nothing after the freeze, or
switches it back on itself, there is no such edit."""

from __future__ import annotations

import textwrap

from script_audit import applied, assert_trains_as, cli

from toolkit.audit.fixes.switch_edits import switch_on_after_its_step

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Linear(2, 2)
        self.q = nn.Linear(3, 1)
        self.pi = nn.Linear(2, 1)

    def track_q_grad(self, enable):
        for p in self.q.parameters():
            p.requires_grad_(enable)


torch.manual_seed(0)
model = Model()
optim = torch.optim.Adam([*model.h.parameters(), *model.q.parameters()], lr=0.01)
pi_optim = torch.optim.Adam(model.pi.parameters(), lr=0.01)
s, r = torch.randn(16, 2), torch.randn(16, 1)


def update_pi():
    pi_optim.zero_grad()
    model.track_q_grad(False)
    pi_loss = -model.q(torch.cat([s, torch.tanh(model.pi(s))], 1)).mean()
    pi_loss.backward()
    pi_optim.step()
SWITCH_ON    return pi_loss.item()


for step in range(4):
    q_loss = F.mse_loss(model.q(torch.cat([model.h(s), torch.randn(16, 1)], 1)), r)
    optim.zero_grad()
    q_loss.backward()
    optim.step()
    update_pi()
if args.out:
    torch.save(model.state_dict(), args.out)
"""


def test_the_freeze_is_undone_after_the_policys_step_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(
        SCRIPT.replace("SWITCH_ON", "    model.track_q_grad(True)\n"), encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT.replace("SWITCH_ON", ""), encoding="utf-8")
    done = applied(folder, "frozen", "--watch", "1")
    assert "insert before it: model.track_q_grad(True)" in done.stdout, done.stdout
    fixed = (folder / "train.py").read_text(encoding="utf-8")
    assert "    pi_optim.step()\n    model.track_q_grad(True)\n    return" in fixed, fixed
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


def _edit(tmp_path, source, line):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return switch_on_after_its_step(str(path), line)


def test_the_edit_follows_the_first_step_after_the_freeze(tmp_path):
    edit = _edit(tmp_path, """\
        for it in range(3):
            D.requires_grad_(False)
            g_loss.backward()
            g_opt.step()
            log()
        """, 2)
    assert edit is not None and edit.line == 5 and edit.new == "    D.requires_grad_(True)\n"


def test_no_edit_without_a_step_after_the_freeze_or_where_it_is_undone(tmp_path):
    assert _edit(tmp_path, """\
        D.requires_grad_(False)
        g_loss.backward()
        """, 1) is None
    assert _edit(tmp_path, """\
        D.requires_grad_(False)
        g_loss.backward()
        D.requires_grad_(True)
        g_opt.step()
        """, 1) is None
    # not a freeze: no constant False
    assert _edit(tmp_path, """\
        D.requires_grad_(flag)
        g_opt.step()
        """, 1) is None
