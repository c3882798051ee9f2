"""``toolkit audit SCRIPT``: a hard value without its straight-through term.

A tensor with a graph (a network's output) turned into a value without one by an operation
with no derivative (a threshold ``(p > 0.5)``, an ``argmax`` and its one-hot), and that value
read by another network whose output a loss reads: that loss term passes no gradient to the
network that made the soft value (Bengio et al. 2013, arXiv:1308.3432; Jang et al. 2016,
arXiv:1611.01144 section 2.2). The edit, at the line where the hard value takes the soft
value's shape: ``hard = (hard - soft).detach() + soft``.

Not findings: the published straight-through line; hard values read only by a metric or by an
evaluation under ``no_grad``; a policy's sampled action read by an action-value critic, the
policy trained by the score function (its log-probability of that action); a vector
quantiser's argmin read by an embedding lookup, with its straight-through copy; a greedy
token fed back to the network that predicted it.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, check_fix, failures, project

BUG = "hash_ae_no_straight_through.py"


@pytest.mark.parametrize("options", [(), ("--watch", "1")], ids=["steps", "watch"])
def test_a_threshold_code_read_by_the_decoder_without_its_straight_through(tmp_path, options):
    code, report = audit(tmp_path, SCRIPTS / BUG, *options)
    assert code == 1
    (hard,) = failures(report)
    assert hard["kind"] == "dead"
    assert sorted(hard["names"]) == ["encoder.0.bias", "encoder.0.weight", "encoder.2.bias",
                                     "encoder.2.weight"]
    assert hard["at"][0].startswith(f"{BUG}:38:")
    (edit,) = hard["edits"]
    assert edit["new"] == "    b = (b - p).detach() + p\n"


@pytest.mark.parametrize("script", ["hash_ae.py", "hash_ae_evaluated.py",
                                    "actor_critic_action_value.py", "vq_tokenizer.py"])
@pytest.mark.parametrize("options", [(), ("--watch", "1")], ids=["steps", "watch"])
def test_hard_values_that_need_no_straight_through_are_no_finding(tmp_path, script, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options)
    assert code == 0 and failures(report) == []


def test_a_greedy_token_fed_back_to_its_own_network_is_no_finding(tmp_path):
    """Free-running training of a recurrent decoder (Bengio et al. 2015, arXiv:1506.03099,
    which does not pass gradient through the sampling decision): the one-hot of its own
    argmax is the next step's input."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
        "torch.manual_seed(0)\n"
        "cell, head = nn.GRUCell(5, 16), nn.Linear(16, 5)\n"
        "opt = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-2)\n"
        "targets = torch.randint(0, 5, (4, 8, 6))\n"
        "for i in range(4):\n"
        "    h, token, loss = torch.zeros(8, 16), torch.zeros(8, 5), 0.0\n"
        "    for t in range(6):\n"
        "        h = cell(token, h)\n"
        "        logits = head(h)\n"
        "        loss = loss + F.cross_entropy(logits, targets[i, :, t])\n"
        "        token = F.one_hot(logits.argmax(-1), 5).float()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n", encoding="utf-8")
    for options in ((), ("--watch", "1")):
        code, report = audit(tmp_path, script, *options)
        assert code == 0 and failures(report) == []


@pytest.mark.slow
def test_the_straight_through_edit_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, BUG, "hash_ae.py")
    check_fix(tmp_path, folder, "dead")
    # the whole run: every saved tensor of the fixed script within 1e-5 of the published one's
    assert_trains_as(folder)
