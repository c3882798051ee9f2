"""The ``shared`` finding for members made by multiplying a list, at the audit's default
(``--steps 2``, the first iterations of each loop): it is made at the second member's first
step, before any member's optimizer steps the one network a second time, so the iterations
audited by default show it (the held-out cases of ``test_principle_members_aliased.py`` run
with ``--watch 1``)."""

from __future__ import annotations

from script_audit import SCRIPTS, audit, failures


def test_the_second_members_first_step_shows_the_one_network(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "independent_q_learners_one_network.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "shared" and found["iteration"] == 1
    assert all(name.startswith("agents.0.") for name in found["names"])
    assert found["at"][0].startswith("independent_q_learners_one_network.py:49:")
