"""An optimizer built over a list made on a line of its own (``encoder_params =
[*encoder.parameters(), *mu_head.parameters()]``, then ``RMSprop(encoder_params)``), the list
leaving out a head the loss trains (VAE-GAN's log-variance head, Larsen et al. 2016): the
``unstepped`` failure names the optimizer's line and the list's, where the fix is as right (the
head added to the list), and its edit trains as the published script. A list made in another
function, or a name the optimizer's line does not hand as its first argument, is not named."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

from toolkit.audit.record import syntax as S

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
trunk, mu_head, logvar_head = nn.Linear(6, 8), nn.Linear(8, 2), nn.Linear(8, 2)
params = PARAMS
optimizer = torch.optim.RMSprop(params, lr=1e-2)
for step in range(3):
    x = torch.randn(16, 6)
    h = torch.tanh(trunk(x))
    mu, logvar = mu_head(h), logvar_head(h)
    loss = (mu ** 2 + logvar.exp() - logvar).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"trunk": trunk.state_dict(), "mu": mu_head.state_dict(),
                "logvar": logvar_head.state_dict()}, args.out)
"""

PUBLISHED = SCRIPT.replace(
    "PARAMS", "[*trunk.parameters(), *mu_head.parameters(), *logvar_head.parameters()]")
LEFT_OUT = SCRIPT.replace("PARAMS", "[*trunk.parameters(), *mu_head.parameters()]")


@pytest.mark.slow
def test_the_failure_names_the_list_and_its_edit_trains_as_published(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEFT_OUT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert code == 1 and found, report["findings"]
    assert found[0]["at"][:2] == [
        "train.py:12: optimizer = torch.optim.RMSprop(params, lr=1e-2)",
        "train.py:11: params = [*trunk.parameters(), *mu_head.parameters()]"], found[0]["at"]
    (tmp_path / "fix").mkdir()
    applied_and_trains(twins(tmp_path / "fix", PUBLISHED, LEFT_OUT), "unstepped",
                       "--watch", "1")


def _made_at(tmp_path, text: str, call: str) -> tuple[int, ...]:
    path = tmp_path / "t.py"
    path.write_text(text, encoding="utf-8")
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines, 1) if call in line)
    column = lines[row - 1].index(call)
    end = lines[row - 1].rindex(")") + 1
    return S.arguments_made_at(str(path), (row, row, column, end))


@pytest.mark.parametrize(("text", "expected"), [
    # the last assignment before the call, in its scope
    ("p = [a]\np = [b]\nopt = SGD(p, lr=1)\np = [c]\n", (2,)),
    # by keyword
    ("p = [a]\nopt = SGD(params=p)\n", (1,)),
    # inside a function: its own assignment, not the module's
    ("p = [a]\ndef f():\n    p = [b]\n    return SGD(p)\n", (3,)),
    # made in another function: not this scope's
    ("def g():\n    p = [a]\ndef f(p):\n    return SGD(p)\n", ()),
    # no plain name
    ("opt = SGD(net.parameters())\n", ()),
    # parameter groups: each group's list, in the order the call names them (the filters of
    # a weight-decay split over named_parameters(), either of which the fix may go in)
    ("d = [p for n, p in named if n.endswith('.weight')]\n"
     "b = [p for n, p in named if n.endswith('.bias')]\n"
     "opt = SGD([{'params': b}, {'params': d, 'weight_decay': 1e-4}], lr=1)\n", (2, 1)),
    # a group whose tensors are no plain name: only the named one
    ("d = [a]\nopt = SGD([{'params': net.parameters()}, {'params': d}])\n", (1,)),
])
def test_the_line_that_made_the_argument(tmp_path, text, expected):
    assert _made_at(tmp_path, text, "SGD(") == expected


SPLIT = """\
import torch
from torch import nn

torch.manual_seed(0)


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gate = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.fc(x) * self.gate


net = Gated()
named = list(net.named_parameters())
decay = [p for n, p in named if n.endswith(".weight")]
no_decay = [p for n, p in named if n.endswith(".bias")]
optimizer = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0},
                               {"params": decay}], lr=1e-2)
for step in range(3):
    loss = net(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.slow
def test_a_tensor_no_group_filter_keeps_is_named_at_the_filters(tmp_path):
    """A weight-decay split by name suffix that keeps neither ``gate`` (IndRNN's recurrent
    vectors, ``weight_hh``, in Sunnydreamrain/IndRNN_pytorch's split): the failure names the
    optimizer's line and both filters, in the order the groups are."""
    script = tmp_path / "train.py"
    script.write_text(SPLIT, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = [f for f in failures(report) if f["kind"] == "unstepped"]
    assert code == 1 and found, report["findings"]
    assert [a.split(":")[1] for a in found[0]["at"][:3]] == ["21", "20", "19"], found[0]["at"]
