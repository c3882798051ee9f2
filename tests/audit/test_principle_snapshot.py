"""``toolkit audit SCRIPT``, the principle of a snapshot that shares its storage with the weights
it was taken from: the script subtracts from tensors an optimizer steps a detached view of
their own elements (``p - p0`` with ``p0 = p.detach()``, ``after[k] - before[k]`` of two
``state_dict()`` calls). The difference is zero whatever the weights, so the snapshot meant to
hold their values from before the steps moves with them. It is a failure (``aliased``) naming
the snapshot as the script holds it and the tensors, whose edit makes the assignment that took
it take a copy (``.clone()``, ``copy.deepcopy``), verified by rerunning the script.

The case (``tests/lens/audit/scripts/``), in a field other than the held-out ones: L2-SP
fine-tuning whose starting point is taken as ``p.detach()``. Must not be flagged: the published
twin (``p.detach().clone()``), and DiCE's ``logp - logp.detach()``, whose operands are no
stepped tensor's elements.
"""

from __future__ import annotations

import pytest
import torch
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

from toolkit.audit.fixes.copy_edits import copy_snapshot
from toolkit.audit.fixes.script_edits import apply_to_text

BACKBONE = ["backbone.0.bias", "backbone.0.weight", "backbone.2.bias", "backbone.2.weight"]


def test_a_starting_point_taken_as_views_is_named_and_copied_where_it_is_taken(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "l2sp_finetune_start_aliased.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "aliased"
    assert found["names"][0] == "start" and sorted(found["names"][1:]) == BACKBONE
    assert found["at"][0].startswith("l2sp_finetune_start_aliased.py:44: start = ")
    (edit,) = found["edits"]
    assert (edit["start"][0], edit["old"], edit["new"]) == (44, "p.detach()", "p.detach().clone()")


def test_the_published_starting_point_is_clean(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "l2sp_finetune.py")
    assert code == 0 and not failures(report)


def test_a_difference_of_an_output_and_its_detached_self_is_no_snapshot(tmp_path):
    # DiCE's magic box: exp(logp - logp.detach()) is one in value, the score function in
    # gradient; logp is made by the step, no stepped tensor's storage
    script = tmp_path / "dice.py"
    script.write_text(
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
        "policy = nn.Linear(3, 2)\nopt = torch.optim.SGD(policy.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    dist = torch.distributions.Categorical(logits=policy(torch.randn(5, 3)))\n"
        "    a = dist.sample()\n    logp = dist.log_prob(a)\n"
        "    loss = -(torch.exp(logp - logp.detach()) * a.float()).mean()\n"
        "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n")
    code, report = audit(tmp_path, script)
    assert code == 0 and not failures(report)


def test_a_state_dict_snapshot_is_deep_copied_and_copy_imported(tmp_path):
    script = tmp_path / "outer.py"
    text = '"""Doc."""\nimport torch\nbefore = model.state_dict()\nafter = model.state_dict()\n'
    script.write_text(text)
    line, edits = copy_snapshot(str(script), "before")
    assert line == 3
    assert apply_to_text(text, edits) == ('"""Doc."""\nimport copy\nimport torch\n'
                                          "before = copy.deepcopy(model.state_dict())\n"
                                          "after = model.state_dict()\n")
    # a name bound twice, or by no assignment, is not edited
    twice = tmp_path / "twice.py"
    twice.write_text(text + "before = model.state_dict()\n")
    assert copy_snapshot(str(twice), "before") is None
    assert copy_snapshot(str(script), "missing") is None


@pytest.mark.slow
def test_the_copy_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, "l2sp_finetune_start_aliased.py", "l2sp_finetune.py")
    applied(folder, "aliased")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)
    assert torch.load(folder / "train.py.pt", weights_only=True).keys() == {"backbone", "head"}
