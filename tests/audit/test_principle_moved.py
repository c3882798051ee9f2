"""``toolkit audit SCRIPT``, the principle of a gradient taken at weights the script has moved
since: two ``backward()`` calls write one ``.grad`` before one optimizer step, and between them
the script moved the tensors in place (not by a step). The step then uses the sum of the
gradients at two different weights. It is a failure (``stale``) naming the tensors and both
backwards, whose edit clears the gradient before the later backward with the optimizer as the
caller can name it, verified by rerunning the script.

The case (``tests/lens/audit/scripts/``), in a field other than the held-out ones: SAM as an
optimizer wrapping its base optimizer, after davda54/sam, its ``first_step()`` called without
``zero_grad=True``. Must not be flagged: the published twin, where the first pass's gradient is
cleared before the second; and gradient accumulation, where the weights stay where they were
between the backwards (``cnn_accum.py``).
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

MODEL = ["model.0.bias", "model.0.weight", "model.2.bias", "model.2.weight"]


def test_the_first_pass_kept_in_grad_across_the_climb_is_named_at_both_backwards(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "sam_sharpness_accumulated.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "stale"
    assert sorted(found["names"]) == MODEL
    assert [a.split(":")[1] for a in found["at"]] == ["73", "75"]
    # the clear before the second backward, through the name the loop has for the base
    # optimizer that steps (the wrapper holds it)
    (edit,) = found["edits"]
    assert edit["start"][0] == 75
    assert edit["new"] == "    optimizer.base_optimizer.zero_grad()\n"


@pytest.mark.parametrize("script", ["sam_sharpness.py", "cnn_accum.py"])
def test_a_cleared_first_pass_or_weights_left_in_place_are_clean(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and not failures(report)


@pytest.mark.slow
def test_the_clear_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, "sam_sharpness_accumulated.py", "sam_sharpness.py")
    applied(folder, "stale")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)
