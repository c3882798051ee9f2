"""``toolkit audit SCRIPT``: where the cut of a trained target goes (the ``target`` rule of
:mod:`toolkit.audit.rules.running.targets`), on pairs of scripts written for it
(``tests/lens/audit/scripts/``: the published form and a bug twin, each citing its source).

- A target whose tensor also trains elsewhere (the same output read with gradient by another
  term, or by a later computation that keeps its graph) is cut at the target's own use: the
  argument of the loss that reads it (SimSiam's ``D(p, z)`` without its stop-gradient, each
  projection also feeding its own prediction; a batch of TD targets bootstrapped from
  ``values[1:]`` of the forward whose ``values[:-1]`` are the predictions), not where the
  shared tensor is made.
- A target made by a call of its own whose line inside the network's ``forward`` also makes the
  predictions (a two-headed network called again on the next state) is cut at the call in the
  step's code; a call whose values are unpacked into names (``_, next_value = model(s2)``) is
  cut where the name that holds the target is read (``next_value.detach()`` in the TD target).
- An output used only as the target (a classifier's own soft targets on an unlabeled batch)
  keeps its cut where it is made: ``model(xu).detach()``.
- The published scripts, with the target already cut, are clean.
- Two terms each of whose target is the other's prediction (R-Drop's symmetric KL between two
  dropout passes) train each output toward the other on purpose: no target. One such term
  alone still has its target.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, cli, failures, project


def _target(tmp_path: Path, script: str) -> dict:
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "target"
    return found


def test_a_symmetric_loss_without_its_stop_gradient_is_cut_at_the_loss_argument(tmp_path):
    found = _target(tmp_path, "simsiam_views_no_stopgrad.py")
    # the target as the script calls it, then the tensors it trains
    assert found["names"][0] in ("z1", "z2")
    assert sorted(found["names"][1:]) == ["f.0.bias", "f.0.weight", "f.2.bias", "f.2.weight",
                                      "f.3.bias", "f.3.weight"]
    assert found["at"][0].startswith("simsiam_views_no_stopgrad.py:34:")
    (edit,) = found["edits"]
    assert (edit["old"], edit["new"]) == ("z", "z.detach()")


def test_targets_bootstrapped_from_the_predictions_forward_are_cut_at_the_loss(tmp_path):
    found = _target(tmp_path, "batch_td_actor_critic_bootstrap_trained.py")
    assert found["names"][0] == "td_target"
    assert sorted(found["names"][1:]) == ["model.body.bias", "model.body.weight",
                                      "model.value_head.bias", "model.value_head.weight"]
    assert found["at"][0].startswith("batch_td_actor_critic_bootstrap_trained.py:76:")
    (edit,) = found["edits"]
    assert (edit["old"], edit["new"]) == ("td_target", "td_target.detach()")


def test_a_bootstrap_unpacked_from_a_call_is_cut_where_its_name_is_read(tmp_path):
    found = _target(tmp_path, "td_actor_critic_online_bootstrap_trained.py")
    assert found["names"][:2] == ["td_target", "next_value"]   # the name the edit cuts
    assert sorted(found["names"][2:]) == ["model.body.bias", "model.body.weight",
                                      "model.value_head.bias", "model.value_head.weight"]
    assert found["at"][0].startswith("td_actor_critic_online_bootstrap_trained.py:63:")
    (edit,) = found["edits"]
    assert (edit["old"], edit["new"]) == ("next_value", "next_value.detach()")


def test_an_output_used_only_as_the_target_is_cut_where_it_is_made(tmp_path):
    found = _target(tmp_path, "uda_soft_targets_trained.py")
    # the target, the output its cut binds (``ori_logits = model(xu)``), the tensors trained
    assert found["names"][:2] == ["targets", "ori_logits"]
    assert sorted(found["names"][2:]) == ["model.0.bias", "model.0.weight", "model.2.bias",
                                      "model.2.weight"]
    assert found["at"][0].startswith("uda_soft_targets_trained.py:37:")
    (edit,) = found["edits"]
    assert edit["new"] == "model(xu).detach()"


@pytest.mark.parametrize("script", ["simsiam_views.py", "batch_td_actor_critic.py",
                                    "td_actor_critic_online.py", "uda_soft_targets.py"])
def test_a_target_already_cut_is_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and failures(report) == []


# --- each edit verified, written, and trains as the published script -----------------------

PAIRS = [("simsiam_views.py", "simsiam_views_no_stopgrad.py"),
         ("batch_td_actor_critic.py", "batch_td_actor_critic_bootstrap_trained.py"),
         ("td_actor_critic_online.py", "td_actor_critic_online_bootstrap_trained.py"),
         ("uda_soft_targets.py", "uda_soft_targets_trained.py")]


@pytest.mark.slow
@pytest.mark.parametrize(("clean", "buggy"), PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path, clean, buggy):
    folder = project(tmp_path, buggy, clean)
    applied(folder, "target")
    done = cli("train.py", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_trains_as(folder)


_MUTUAL = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    p, q = model(x), model({other})
    kl = F.kl_div(F.log_softmax(p, -1), F.softmax(q, -1), reduction="batchmean")
    {more}
    loss = F.cross_entropy(p, y) + {fit} + kl
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


_FIT_Q = "F.cross_entropy(q, y)"


@pytest.mark.parametrize(("more", "other", "fit", "target"), [
    ('kl = kl + F.kl_div(F.log_softmax(q, -1), F.softmax(p, -1), reduction="batchmean")', "x",
     _FIT_Q, False),
    ("kl = kl", "x", _FIT_Q, False),
    ("kl = kl", "torch.randn(8, 4)", "0", True)],
    ids=["both_directions", "one_direction", "one_direction_on_other_inputs"])
def test_a_mutual_comparison_has_no_target_and_one_direction_has(tmp_path, more, other, fit,
                                                                 target):
    # R-Drop (Wu et al. 2021, eq. 2): KL(p || q) + KL(q || p) of two dropout passes; one
    # direction on the inputs the loss fits is TRADES's form (Zhang et al. 2019, eq. 5, whose
    # code trains both sides); toward a prediction on other inputs, a guessed label (VAT's)
    script = tmp_path / "rdrop.py"
    script.write_text(_MUTUAL.format(more=more, other=other, fit=fit))
    code, report = audit(tmp_path, script)
    assert [f["kind"] for f in failures(report)] == (["target"] if target else [])
    assert code == (1 if target else 0)
