"""``toolkit audit SCRIPT``, the principle of a target network that is the trained network
itself, whatever made it so: ``target = model`` or a shallow ``copy.copy(model)``, a new module
whose layers and parameters are the model's own. Read under ``no_grad`` it looks like a target,
but it moves with every step. The ``aliased`` finding names both names and the assignment, and
its edit makes the copy deep (``copy.deepcopy``), verified by rerunning the script.

The case (``tests/lens/audit/scripts/``), in a field other than the held-out ones: neural
fitted Q iteration (Riedmiller 2005) with a target network refreshed by ``load_state_dict``.
Must not be flagged: the published twin with ``copy.deepcopy``.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

Q = ["q_net.0.bias", "q_net.0.weight", "q_net.2.bias", "q_net.2.weight"]


def test_a_shallow_copy_read_as_a_target_is_named_and_deep_copied(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "fitted_q_shallow_target.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "aliased"
    assert sorted(found["names"]) == Q
    assert found["at"][0] == "fitted_q_shallow_target.py:32: target_net = copy.copy(q_net)"
    (edit,) = found["edits"]
    assert (edit["start"][0], edit["old"], edit["new"]) == (32, "copy.copy(q_net)",
                                                          "copy.deepcopy(q_net)")


def test_the_deep_copy_is_clean(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "fitted_q.py")
    assert code == 0 and not failures(report)


@pytest.mark.slow
def test_the_deep_copy_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, "fitted_q_shallow_target.py", "fitted_q.py")
    applied(folder, "aliased")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)


_WRAPPED = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
wrapped = {wrap}
optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    loss = F.cross_entropy(wrapped(x), y)
    with torch.no_grad():
        accuracy = (net(x).argmax(1) == y).float().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_wrapper_holding_the_network_is_no_copy_of_it(tmp_path):
    # a network trained through a wrapper (a Sequential, as DDP holds its module) and read
    # plainly under no_grad for a metric is one network by design, not a copy of it
    script = tmp_path / "wrapped.py"
    script.write_text(_WRAPPED.format(wrap="nn.Sequential(net)"))
    code, report = audit(tmp_path, script)
    assert code == 0 and not failures(report)
