"""A step that takes a closure writes its own gradient: a network trained by Adam, then by
L-BFGS from where Adam left it (physics-informed networks, Raissi et al. 2019, train this way:
maziarraissi/PINNs runs Adam, then L-BFGS-B), is stepped by two optimizers, and no
``backward()`` runs between Adam's last step and the call ``lbfgs.step(closure)``: the closure
clears and writes the gradient inside that call, before L-BFGS reads it. No finding: the
gradient Adam stepped with is not stepped again. The same L-BFGS step handed no closure of its
own (a gradient written outside the call, by the same loss) still steps the gradient Adam
stepped with, and still fails; so does a closure that never clears (its first ``backward()``
adds to the gradient Adam stepped with), one finding for all the tensors, whose edit clears
them first thing in the closure: the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
x = torch.linspace(-1, 1, 16).unsqueeze(1)
y = torch.sin(3 * x)


def loss_of():
    return ((net(x) - y) ** 2).mean()


adam = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(3):
    loss = loss_of()
    adam.zero_grad()
    loss.backward()
    adam.step()

lbfgs = torch.optim.LBFGS(net.parameters(), max_iter=4)


def closure():
    CLEAR
    loss = loss_of()
    loss.backward()
    return loss


STEP
"""


@pytest.mark.parametrize(("step", "clear", "found"), [
    ("lbfgs.step(closure)", "lbfgs.zero_grad()", False),
    ("lbfgs.step(closure=closure)", "lbfgs.zero_grad()", False),
    # the gradient L-BFGS reads first is the one Adam stepped with: moved twice
    ("lbfgs.step(lambda: loss)", "lbfgs.zero_grad()", True),
    # the closure's gradient added to the one Adam stepped with
    ("lbfgs.step(closure)", "pass", True),
], ids=["closure", "closure_by_keyword", "no_gradient_of_its_own", "closure_never_cleared"])
def test_a_closure_writes_the_gradient_its_step_reads(tmp_path, step, clear, found):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("STEP", step).replace("CLEAR", clear), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    shared = [f for f in failures(report) if f["kind"] == "shared"]
    assert bool(shared) == found, [f["message"] for f in failures(report)]
    if not found:
        assert code == 0, [f["message"] for f in failures(report)]


def test_the_clear_a_closure_left_out_is_written_first_thing_in_it(tmp_path):
    published = ("import argparse\n" + SCRIPT.replace("STEP", "lbfgs.step(closure)").replace(
        "torch.manual_seed(0)", "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--out', default=None)\nargs = parser.parse_args()\n"
        "torch.manual_seed(0)") + "if args.out:\n    torch.save(net.state_dict(), args.out)\n")
    folder = twins(tmp_path, published.replace("CLEAR", "lbfgs.zero_grad()"),
                   published.replace("CLEAR", "pass"))
    done = applied_and_trains(folder, "shared", "--watch", "1")
    assert done.stdout.count("FAIL    shared:") == 1, done.stdout
    assert "    lbfgs.zero_grad()\n    pass\n" in (folder / "train.py").read_text()
