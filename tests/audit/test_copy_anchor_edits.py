"""The edit that makes a reference point of a network's weights hold copies
(:func:`~toolkit.audit.fixes.copy_edits.copy_anchor`), in each form a script binds the weights
themselves by."""

from __future__ import annotations

import pytest

from toolkit.audit.fixes.copy_edits import copy_anchor
from toolkit.audit.fixes.script_edits import apply_to_text

FORMS = {
    "start = list(net.parameters())": "start = [p.detach().clone() for p in net.parameters()]",
    "start = tuple(net.parameters())": "start = tuple(p.detach().clone() for p in "
                                       "net.parameters())",
    "start = dict(net.named_parameters())": "start = {n: p.detach().clone() for n, p in "
                                            "net.named_parameters()}",
    "start = [w for w in net.parameters()]": "start = [w.detach().clone() for w in "
                                             "net.parameters()]",
    "start = list(w for w in net.parameters())": "start = list(w.detach().clone() for w in "
                                                 "net.parameters())",
    "start = {k: v for k, v in net.named_parameters()}": "start = {k: v.detach().clone() for k, "
                                                         "v in net.named_parameters()}",
}


@pytest.mark.parametrize("bound", sorted(FORMS))
def test_each_form_of_the_live_weights_is_made_to_hold_copies(tmp_path, bound):
    text = f"import torch\nnet = torch.nn.Linear(2, 2)\n{bound}\n"
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    line, edits = copy_anchor(str(script), "start")
    assert line == 3
    assert apply_to_text(text, edits).splitlines()[2] == FORMS[bound]


def test_an_item_assigned_in_a_loop_is_copied(tmp_path):
    text = ("import torch\nnet = torch.nn.Linear(2, 2)\nprev = {}\n"
            "for n, p in net.named_parameters():\n    prev[n] = p\n")
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    line, edits = copy_anchor(str(script), "prev")
    assert line == 5
    assert apply_to_text(text, edits).splitlines()[4] == "    prev[n] = p.detach().clone()"


@pytest.mark.parametrize("text", [
    # an item computed from the loop's variable holds no weight itself
    "start = [p * 2 for p in net.parameters()]\n",
    # bound twice: which one the reference point is, is not known
    "start = list(net.parameters())\nstart = list(net.parameters())\n",
    # no assignment of a known form
    "start = net.parameters()\n",
])
def test_no_edit_where_no_one_binding_holds_the_weights_themselves(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text("import torch\nnet = torch.nn.Linear(2, 2)\n" + text, encoding="utf-8")
    assert copy_anchor(str(script), "start") is None
    assert copy_anchor(str(script), "missing") is None
