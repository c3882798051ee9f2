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
