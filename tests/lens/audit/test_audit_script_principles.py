"""``toolkit audit SCRIPT``: one principle per test, each on a pair of scripts written for it
(``scripts/``: the published form and a bug twin, each citing its source), in fields other
than the held-out ones.

- A cut that makes a target: a network whose output is cut off (``.detach()``, as under
  ``no_grad``) and meets the prediction only in the loss is held by its optimizer for nothing
  (information); without the cut the loss trains it through its own target (a failure whose
  ``.detach()`` edit trains as the published script).
- Provenance of a copy: a tensor the script moves itself along the line to another stepped
  tensor (a momentum or EMA copy) that a loss's gradient reaches is the copy the prediction
  is compared with, trained through its own output; a tensor moved by hand in any other way
  (a critic's weight clipping) is no copy.
- Reached, and given exact zeros: a stepped tensor a loss reaches whose gradient is exactly
  zero on two iterations, because the gradients reaching it cancel inside one expression
  (``w + (q(w) - w)``, a straight-through line without its cut) is dead in effect; the edit
  cuts the operand there. The published straight-through line is no finding.
- A prediction fed back: an output the loss compares with its target, read again by a later
  call of the network that made it without a cut (closed-loop training, scheduled sampling),
  is a carried graph; the edit cuts it where the script passes it on. A detached feedback, or
  a state carried between calls that no comparison reads (truncated BPTT), is no finding.
- Optimizer membership by role: an optimizer whose step's own loss reaches none of the
  tensors it holds, and reaches tensors no optimizer holds, is built over the wrong
  parameters: its argument is replaced, wherever the tensors it should hold lie (a second
  phase's head below a network read under ``no_grad`` too).
- ``inference_mode`` is a cut, as ``no_grad`` is: a network read under it whose output a
  network that trains reads (through a ``.clone()``, or any computation without a graph) is
  dead where its optimizer holds it; the edit takes its call out of the block. Read that way
  for a classifier alone (a linear probe), it is no finding.
- A copy kept in sync and never read: a network the script holds and never calls, moved after
  the steps along the line to a stepped network (a Polyak or EMA copy), while that stepped
  network, called under no_grad, makes the constant a loss compares with, is where the
  target was meant to be read (``aliased``); the edit calls the copy there, by the name the
  script reads it by (a module's global, or an attribute of the object whose method calls
  the network: an agent's ``self.critic_target``). A target network
  that is read, or an average kept for evaluation only (the online network's no_grad output
  reaches no loss), is no finding.
"""

from __future__ import annotations

import pytest
import torch
from script_audit import SCRIPTS, audit, check_fix, failures, project

from toolkit.audit.rules.running.kept_in_sync import toward

# --- a cut that makes a target --------------------------------------------------------------

def test_a_teacher_detached_where_its_targets_are_made_is_held_for_nothing(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "noisy_student.py")
    assert code == 0 and failures(report) == []
    held = [f for f in report["findings"] if f["kind"] == "hand_updated"]
    assert len(held) == 1 and all(n.startswith("model.teacher.") for n in held[0]["names"])


def test_a_teacher_whose_targets_carry_gradient_is_a_trained_target(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "noisy_student_trained_teacher.py")
    assert code == 1
    (target,) = failures(report)
    assert target["kind"] == "target"
    assert target["names"][0] == "soft"    # the target as the script calls it
    assert sorted(target["names"][1:]) == ["model.teacher.0.bias", "model.teacher.0.weight",
                                       "model.teacher.2.bias", "model.teacher.2.weight"]
    assert any(a.startswith("noisy_student_trained_teacher.py:43:") for a in target["at"])
    assert target["edits"][0]["new"] == "model.teacher(xu).detach()"


def test_a_detached_value_a_network_that_trains_reads_is_no_target(tmp_path):
    """A backbone's features detached under a trained head: the backbone is dead, a failure
    (the cut is on the prediction's path, not a target's)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
        "backbone, head = nn.Linear(4, 8), nn.Linear(8, 1)\n"
        "opt = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)\n"
        "for _ in range(3):\n"
        "    x = torch.randn(8, 4)\n"
        "    loss = head(backbone(x).detach()).pow(2).mean()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n", encoding="utf-8")
    code, report = audit(tmp_path, script)
    assert code == 1
    assert [f["kind"] for f in failures(report)] == ["dead"]


# --- provenance of a copy ------------------------------------------------------------------

def test_a_momentum_copy_whose_output_carries_gradient_is_a_trained_target(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "curl_keys_trained.py")
    assert code == 1
    (target,) = failures(report)
    assert target["kind"] == "target"
    assert all(n.startswith("curl.encoder_target.") for n in target["names"])
    assert target["at"][0].startswith("curl_keys_trained.py:50:")
    assert target["edits"][0]["new"] == "curl.encoder_target(obs_pos).detach()"


def test_the_published_momentum_copy_is_held_for_nothing(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "curl.py")
    assert code == 0 and failures(report) == []
    assert [f["kind"] for f in report["findings"]] == ["hand_updated"]


def test_weights_clipped_by_hand_after_their_step_are_no_copy(tmp_path):
    """WGAN's critic (Arjovsky et al. 2017): its weights clamped after each step, by hand,
    toward no other tensor; two layers of one shape, so a copy could be mistaken for one."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
        "critic = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))\n"
        "opt = torch.optim.RMSprop(critic.parameters(), lr=0.05)\n"
        "for _ in range(4):\n"
        "    loss = critic(torch.randn(8, 4)).mean() - critic(torch.randn(8, 4) + 1).mean()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    for p in critic.parameters():\n"
        "        p.data.clamp_(-0.01, 0.01)\n", encoding="utf-8")
    code, report = audit(tmp_path, script)
    assert code == 0 and failures(report) == []


# --- optimizer membership by role -----------------------------------------------------------

def test_an_optimizer_built_over_the_wrong_network_has_its_argument_replaced(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "lsgan_wrong_optimizer.py")
    assert code == 1
    (found,) = failures(report)   # one finding: the dead generator in optimizer_D is its part
    assert found["kind"] == "unstepped"
    assert all(n.startswith("discriminator.") for n in found["names"])
    assert found["at"][0].startswith("lsgan_wrong_optimizer.py:26:")
    (edit,) = found["edits"]
    assert (edit["old"], edit["new"]) == ("generator.parameters()", "discriminator.parameters()")


def test_the_published_lsgan_is_clean(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "lsgan.py")
    assert code == 0 and failures(report) == []


# --- reached, and given exact zeros ---------------------------------------------------------

def test_a_straight_through_line_without_its_cut_is_dead_in_effect(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "qat_ste_cancelled.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "dead"
    assert sorted(found["names"]) == ["model.0.weight", "model.2.weight"]
    assert found["at"][0].startswith("qat_ste_cancelled.py:31:")
    (edit,) = found["edits"]
    assert edit["new"] == "(quantised - self.weight).detach()"


def test_the_published_straight_through_estimator_is_clean(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "qat.py")
    assert code == 0 and failures(report) == []


# --- a prediction fed back -------------------------------------------------------------------

def test_a_prediction_fed_back_without_a_cut_is_a_carried_graph(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "sine_forecaster_fed_back.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "carried" and found["iteration"] == 3
    assert found["at"][0] == "sine_forecaster_fed_back.py:43: x_t = output"
    (edit,) = found["edits"]
    assert edit["new"] == "output.detach()"


@pytest.mark.parametrize("script", ["sine_forecaster.py", "word_lm.py"])
def test_a_detached_feedback_or_a_carried_state_is_no_feedback(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script, "--watch", "1")
    assert code == 0 and failures(report) == []


# --- optimizer membership by role ---------------------------------------------------------

def test_an_optimizer_over_the_first_phases_network_is_built_over_the_wrong_one(tmp_path):
    # the second phase's loss reaches the probe, which no optimizer holds, and none of the
    # encoder's tensors its optimizer holds: the argument is replaced, though the probe lies
    # below every stepped tensor (no wasted work, no dead encoder)
    code, report = audit(tmp_path, SCRIPTS / "dae_probe_wrong_optimizer.py")
    assert code == 1
    (wrong,) = failures(report)
    assert wrong["kind"] == "unstepped" and "wrong parameters" in wrong["message"]
    assert set(wrong["names"]) == {"probe.weight", "probe.bias"}
    assert wrong["at"][0].startswith("dae_probe_wrong_optimizer.py:47:")
    (edit,) = wrong["edits"]
    assert (edit["old"], edit["new"]) == ("encoder.parameters()", "probe.parameters()")
    assert not [f for f in report["findings"] if f["kind"] == "wasted"]


def test_a_probe_trained_on_a_frozen_code_is_no_finding(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "dae_probe.py")
    assert code == 0 and report["findings"] == []


# --- inference_mode is a cut ------------------------------------------------------------

def test_a_network_read_under_inference_mode_and_cloned_is_dead_where_it_should_train(tmp_path):
    # the clone hides where the features were made; the constants it was computed from do
    # not: the classifier that trains reads them, so the front end is on the prediction's
    # side, and the edit takes its call out of the block
    code, report = audit(tmp_path, SCRIPTS / "kws_finetune_inference_mode.py")
    assert code == 1
    (dead,) = failures(report)
    assert dead["kind"] == "dead" and "torch.inference_mode()" in dead["message"]
    assert set(dead["names"]) - {"features"} and all(
        n.startswith("frontend.") for n in dead["names"] if n != "features")
    assert dead["at"][0].startswith("kws_finetune_inference_mode.py:43:")
    (edit,) = dead["edits"]
    assert edit["old"].startswith("    with torch.inference_mode():\n")
    assert edit["new"] == "    features = frontend(wave)\n"


@pytest.mark.parametrize("script", ["kws_finetune.py", "kws_probe.py"])
def test_a_front_end_trained_or_only_used_under_inference_mode_is_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and report["findings"] == []


# --- a copy kept in sync and never read ---------------------------------------------------

def test_a_copy_kept_in_sync_and_never_read_is_where_the_target_was_meant(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "td3_target_from_online.py")
    assert code == 1
    (aliased,) = failures(report)
    assert aliased["kind"] == "aliased"
    assert aliased["names"] and all(n.startswith("qf2.") for n in aliased["names"])
    assert aliased["at"][0].startswith("td3_target_from_online.py:102:")
    (edit,) = aliased["edits"]
    assert edit["new"] == "qf2_target" and edit["start"][0] == 102


def test_a_copy_held_as_an_agents_attribute_is_found_by_the_name_the_method_reads(tmp_path):
    # stable-baselines3's layout: the agent names its networks self.critic and
    # self.critic_target; the copy is found among the attributes of the object whose method
    # calls the critic, and the edit calls it by that name
    code, report = audit(tmp_path, SCRIPTS / "sac_agent_target_from_online.py")
    assert code == 1
    (aliased,) = failures(report)
    assert aliased["kind"] == "aliased"
    assert aliased["names"] and all(n.startswith("self.critic.") for n in aliased["names"])
    assert aliased["at"][0].startswith("sac_agent_target_from_online.py:110:")
    (edit,) = aliased["edits"]
    assert (edit["old"], edit["new"], edit["start"][0]) == ("self.critic", "self.critic_target",
                                                           110)


@pytest.mark.parametrize("script", ["td3.py", "sac_agent.py"])
def test_a_target_network_that_is_read_is_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and failures(report) == []


def test_weights_averaged_for_evaluation_only_are_no_target(tmp_path):
    # the average is kept in sync and never read while training, and the online network is
    # called under no_grad every step, but for a logged accuracy that no loss reads: the
    # average was meant for evaluation, not as a target, so nothing is wrong
    code, report = audit(tmp_path, SCRIPTS / "averaged_weights_eval.py")
    assert code == 0 and report["findings"] == []


def test_an_average_an_object_keeps_for_evaluation_is_no_target(tmp_path):
    # the same, the average held as a trainer's attribute (timm's ModelEmaV2 beside the model)
    code, report = audit(tmp_path, SCRIPTS / "ema_agent_eval.py")
    assert code == 0 and report["findings"] == []


def test_a_copy_is_moved_along_the_line_to_its_network():
    online, before = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0])
    assert toward(before, 0.9 * before + 0.1 * online, online)     # a Polyak step
    assert toward(before, online.clone(), online)                   # a copy outright
    assert not toward(before, before.clone(), online)               # not moved
    assert not toward(before, torch.tensor([0.5, -0.5]), online)    # moved elsewhere
    # a small move, small beside the gap but with a part across the line far above rounding
    # (Reptile's interpolation toward a snapshot no optimizer holds, beside another layer)
    far = torch.tensor([3.0, 0.0])
    assert not toward(before, torch.tensor([1e-3, 1e-3]), far)
    # a move within rounding (a projection that rescales a row of norm 1 + 1e-7) has no
    # direction, whichever side of the line it falls
    assert not toward(far.double(), far.double() * (1 - 1e-8), torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("m", [0.9, 0.999, 0.9999])
def test_a_polyak_step_in_float32_is_along_the_line_whatever_its_rounding(m):
    # every seed: the float32 step's rounding stays within the slack (measured: at most a fifth
    # of it), and a step smaller than rounding says nothing either way
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        k = torch.randn(500, generator=g) * 5
        q = k + 0.1 * torch.randn(500, generator=g)
        for moved in (k * m + q * (1 - m), torch.lerp(k, q, 1 - m)):
            assert toward(k.double(), moved.double(), q.double())


# --- each edit verified, written, and trains as the published script -----------------------

PAIRS = [("noisy_student.py", "noisy_student_trained_teacher.py", "target", ()),
         ("curl.py", "curl_keys_trained.py", "target", ()),
         ("lsgan.py", "lsgan_wrong_optimizer.py", "unstepped", ()),
         ("qat.py", "qat_ste_cancelled.py", "dead", ()),
         ("sine_forecaster.py", "sine_forecaster_fed_back.py", "carried", ("--watch", "1")),
         ("td3.py", "td3_target_from_online.py", "aliased", ()),
         ("sac_agent.py", "sac_agent_target_from_online.py", "aliased", ()),
         ("kws_finetune.py", "kws_finetune_inference_mode.py", "dead", ()),
         ("dae_probe.py", "dae_probe_wrong_optimizer.py", "unstepped", ())]


@pytest.mark.slow
@pytest.mark.parametrize(("clean", "buggy", "kind", "options"), PAIRS, ids=[p[1] for p in PAIRS])
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path, clean, buggy, kind,
                                                                 options):
    check_fix(tmp_path, project(tmp_path, buggy, clean), kind, *options, what=clean)
