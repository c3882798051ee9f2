"""``toolkit audit SCRIPT``: an estimate fed back within one iteration (self-conditioning,
recycling), on scripts written for it (``tests/lens/audit/scripts/``) in a field other than the
held-out ones: an AlphaFold-style recycling refiner, and legitimate weight-tied unrolls.

- Within one iteration, a network's output that no loss compares, fed back (through any
  computation) as an input of a later call of the same network on the same input, whose output
  the loss compares, while on other iterations that argument holds a constant (zeros, no
  estimate: the network is trained to predict without it too), makes the loss train the network
  through every earlier pass; the published form (AlphaFold's recycling, self-conditioning)
  cuts it. A failure at the statement that makes the estimate, naming the network's tensors;
  the edit runs that statement under ``torch.no_grad()``, which trains as the published script.
- No finding: the published twin (the estimate made under ``no_grad``); a weight-tied unroll
  trained end to end (learned ISTA: the loss's call never reads the constant); the same with
  every step's output in the loss (deep supervision); a recurrent cell stepped over new
  observations (a learned tracking filter: the later call reads other inputs).
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, check_fix, failures, project


def test_a_recycled_estimate_kept_in_the_graph_is_a_failure_where_it_is_made(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "recycling_refiner_not_cut.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "carried" and found["iteration"] == 0
    assert found["at"][0] == ("recycling_refiner_not_cut.py:63: "
                              "prev_coords = model(features, prev_coords)")
    assert found["names"] and all(n.startswith("model.") for n in found["names"])
    assert "`prev_coords`" in found["message"]
    (edit,) = found["edits"]
    assert edit["start"][0] == 63
    assert edit["new"] == ("        with torch.no_grad():\n"
                           "            prev_coords = model(features, prev_coords)\n")


@pytest.mark.parametrize("args", [("recycling_refiner.py",), ("lista_tied.py",),
                                  ("lista_tied.py", "--deep"), ("learned_tracker.py",)],
                         ids=["published", "tied-unroll", "deep-supervision", "tracker"])
def test_a_cut_estimate_or_an_unroll_trained_end_to_end_is_no_finding(tmp_path, args):
    code, report = audit(tmp_path, SCRIPTS / args[0], "--watch", "1", args=args[1:])
    assert code == 0 and failures(report) == []


@pytest.mark.slow
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, "recycling_refiner_not_cut.py", "recycling_refiner.py")
    check_fix(tmp_path, folder, "carried", "--watch", "1")
    assert_trains_as(folder)
