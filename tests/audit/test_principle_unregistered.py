"""``toolkit audit SCRIPT``, the principle of a learned tensor kept where torch does not look: a
module keeps parameters in a plain ``list`` or ``dict`` (or modules so), so
``model.parameters()`` never holds them and the optimizer built from it never steps them,
though the loss trains them. A failure (``unstepped``) at the line that keeps them and the
optimizer's, each tensor named as registering gives it (``model.resweights.0``), whose edit
registers the container where it is made (``torch.nn.ParameterList([...])``), as the step audit
writes it, verified by rerunning the script.

The case (``tests/lens/audit/scripts/``), in a field other than the held-out ones: ReZero's
residual weights (Bachlechner et al. 2021). Must not be flagged: the published twin, whose
``nn.ParameterList`` registers them.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded


def test_parameters_in_a_plain_list_are_named_and_registered_where_kept(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "rezero_weights_in_list.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped"
    assert sorted(found["names"]) == [f"model.resweights.{i}" for i in range(4)]
    assert [a.split(":")[1] for a in found["at"][:2]] == ["29", "40"]
    (edit,) = found["edits"]
    assert edit["start"][0] == 29
    assert edit["new"] == ("torch.nn.ParameterList([nn.Parameter(torch.zeros(1)) "
                           "for _ in range(depth)])")


def test_the_registered_list_is_clean(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "rezero.py")
    assert code == 0 and not failures(report)


@pytest.mark.slow
def test_the_registration_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, "rezero_weights_in_list.py", "rezero.py")
    applied(folder, "unstepped")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)
