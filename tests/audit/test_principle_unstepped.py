"""``toolkit audit SCRIPT``: optimizer membership, on scripts written for it
(``tests/lens/audit/scripts/``, each citing the published script it follows).

- A learned tensor made a plain tensor: a leaf tensor that requires grad, held as an attribute
  of a module whose other parameters an optimizer steps, reached by a loss and held by no
  optimizer (CLIP's temperature, ResMLP's LayerScale made with ``requires_grad`` instead of as
  ``nn.Parameter``), is an unstepped tensor: a failure at the line that makes it, whose edit
  makes it a ``Parameter`` in the script's own spelling, so that ``model.parameters()`` holds
  it. Not a finding: such a tensor held by an optimizer built over a list that names it, an
  input perturbation made to require grad on purpose (FGSM), or one a module holds that the
  script moves itself (free adversarial training's noise).
- The group left out follows the no-decay convention: when the tensors an edit adds to an
  optimizer with weight decay are all of one dimension or fewer (biases, norm weights) and
  the optimizer decays none such, the group the edit adds has ``"weight_decay": 0.0``, as
  nanoGPT's ``configure_optimizers`` and timm's ``param_groups_weight_decay`` build it.
- An optimizer built over one part of a model (``param_groups_weight_decay(model.backbone,
  ...)``) where the loss trains the rest too: the edit builds it over the model, as the line
  writes it, so that the groups the line makes hold every tensor (the no-decay group included).
- A classifier whose weights the loss reads through an operation of the weights alone (the
  normalised class weights of a cosine classifier) lies between the loss and the trained
  features, as a plain linear head does: left out of the optimizer, a failure, not wasted work.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded

from toolkit.audit.cli import main
from toolkit.audit.verify.rerun import load_record


def recorded_with_proof(into: Path, script: Path) -> tuple[int, dict]:
    """``toolkit audit --record INTO SCRIPT`` in this process, each edit verified: its exit
    status and report."""
    code = main(["--record", str(into), str(script)])
    return code, load_record(str(into))[0]


def _line(script: Path, text: str) -> int:
    lines = script.read_text().splitlines()
    return next(i for i, x in enumerate(lines, 1) if text in x)


# --- a learned tensor made a plain tensor ---------------------------------------------------

def test_a_temperature_made_a_plain_tensor_is_made_a_parameter(tmp_path):
    script = SCRIPTS / "clip_temperature_plain.py"
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    line = _line(script, "        self.logit_scale = ")
    assert found["kind"] == "unstepped" and found["names"] == ["model.logit_scale"]
    assert found["at"][0].startswith(f"clip_temperature_plain.py:{line}:")
    (edit,) = found["edits"]
    assert edit["start"][0] == line
    assert edit["new"] == "nn.Parameter(torch.ones([]) * math.log(1 / 0.07))"


def test_a_layer_scale_made_a_plain_tensor_is_made_a_parameter(tmp_path):
    script = SCRIPTS / "resmlp_layerscale_plain.py"
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped"
    assert sorted(found["names"]) == [f"model.blocks.{b}.gamma_{k}" for b in (0, 1)
                                      for k in (1, 2)]
    lines = {_line(script, f"        self.gamma_{k} = ") for k in (1, 2)}
    assert {int(a.split(":")[1]) for a in found["at"]} >= lines
    assert {e["start"][0] for e in found["edits"]} == lines
    assert {e["new"] for e in found["edits"]} == {"nn.Parameter(torch.full((dim,), init_values))"}


def test_a_plain_tensor_of_a_module_an_agent_holds_is_made_a_parameter(tmp_path):
    """CURL's bilinear matrix, a plain tensor of a module that is never called (its methods
    are) and that an object of the script's, no module itself, holds (``agent.curl``): found
    at the line that makes it, and made a parameter there."""
    script = SCRIPTS / "curl_bilinear_plain.py"
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    line = _line(script, "        self.W = ")
    assert found["kind"] == "unstepped" and found["names"] == ["agent.curl.W"]
    assert found["at"][0].startswith(f"curl_bilinear_plain.py:{line}:")
    (edit,) = found["edits"]
    assert (edit["start"][0], edit["new"]) == (line, "nn.Parameter(torch.rand(z_dim, z_dim))")


@pytest.mark.slow
def test_the_parameter_edit_is_verified_beside_a_failure_whose_keys_it_moves(tmp_path):
    """CURL as published steps its encoder twice, by the encoder's optimizer and by the one
    over ``CURL.parameters()`` (a failure of its own, ``shared``). Making ``W`` a parameter puts
    it first in that optimizer's list, which moves the keys of the encoder's tensors there:
    the rerun's ``shared`` finding is the same failure, matched by the tensors' names, and
    the edit is verified."""
    text = (SCRIPTS / "curl_bilinear_plain.py").read_text()
    text = text.replace(
        "        self.cpc_optimizer = torch.optim.Adam(self.curl.parameters(), lr=1e-2)\n",
        "        self.cpc_optimizer = torch.optim.Adam(self.curl.parameters(), lr=1e-2)\n"
        "        self.encoder_optimizer = torch.optim.Adam(self.encoder.parameters(), lr=1e-2)\n")
    text = text.replace("        self.cpc_optimizer.step()\n",
                        "        self.encoder_optimizer.step()\n"
                        "        self.cpc_optimizer.step()\n")
    script = tmp_path / "proj" / "train.py"
    script.parent.mkdir()
    script.write_text(text)
    code, report = recorded_with_proof(tmp_path / "record", script)
    assert code == 1
    kinds = {f["kind"]: f for f in failures(report)}
    assert set(kinds) == {"shared", "unstepped"}
    assert kinds["unstepped"]["names"] == ["agent.curl.W"]
    assert kinds["unstepped"]["verified"] is True, kinds["unstepped"]["why_not"]


def test_a_plain_tensor_an_optimizer_lists_is_no_finding(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "clip_temperature_listed.py")
    assert code == 0 and failures(report) == []
    assert not [f for f in report["findings"] if f["kind"] == "unstepped"]


def test_a_perturbation_made_to_require_grad_is_no_finding(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "fgsm_fast_adversarial.py")
    assert code == 0 and failures(report) == []


def test_a_perturbation_a_module_holds_and_the_script_moves_is_no_finding(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "free_adversarial_noise.py")
    assert code == 0 and failures(report) == []


# --- the group left out follows the no-decay convention -------------------------------------

def test_a_dropped_no_decay_group_is_added_without_weight_decay(tmp_path):
    code, report = audit(tmp_path, SCRIPTS / "gpt_no_decay_group_dropped.py")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped"
    assert all(n.endswith((".bias", "ln_1.weight", "ln_2.weight", "ln_f.weight"))
               for n in found["names"])
    (edit,) = found["edits"]
    assert edit["new"].startswith('optimizer.add_param_group({"params": [')
    assert edit["new"].endswith(', "weight_decay": 0.0})\n')


# --- each edit verified, written, and trains as the published script -----------------------

def test_an_optimizer_built_over_the_backbone_alone_is_built_over_the_model(tmp_path):
    script = SCRIPTS / "convnext_groups_backbone_only.py"
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    line = _line(script, "optimizer = torch.optim.AdamW(")
    assert found["kind"] == "unstepped"
    assert found["names"] == ["model.norm.weight", "model.norm.bias", "model.head.weight",
                              "model.head.bias"]
    (edit,) = found["edits"]
    assert (edit["start"][0], edit["old"], edit["new"]) == (line, "model.backbone", "model")


def test_a_cosine_classifier_left_out_of_the_optimizer_is_a_failure_not_wasted_work(tmp_path):
    script = SCRIPTS / "baseline_pp_classifier_left_out.py"
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped" and found["names"] == ["classifier.weight"]
    assert found["at"][0].startswith(
        f"baseline_pp_classifier_left_out.py:{_line(script, 'optimizer = torch.optim.Adam(')}:")
    assert "wasted" not in [f["kind"] for f in report["findings"]]


def test_a_network_left_out_of_a_list_an_optimizer_and_its_clip_share_is_listed_there(
        tmp_path):
    """Dreamer's world model: the optimizer and the gradient clip are built over one list, taken
    from a tuple of networks that leaves the reward head out. The edit names the head in that
    tuple, so that the clip holds it too (a parameter group would leave it out of the clip),
    though the step switches the world model off and back on each iteration: a flag restored
    is no tensor made after the optimizer was built."""
    script = SCRIPTS / "dreamer_reward_left_out.py"
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped"
    assert found["names"] == ["reward_model.weight", "reward_model.bias"]
    (edit,) = found["edits"]
    assert (edit["start"][0], edit["old"], edit["new"]) == (
        _line(script, "model_params = ["), "decoder", "decoder, reward_model")


PAIRS = [("clip_temperature.py", "clip_temperature_plain.py"),
         ("convnext_groups.py", "convnext_groups_backbone_only.py"),
         ("baseline_pp.py", "baseline_pp_classifier_left_out.py"),
         ("resmlp_layerscale.py", "resmlp_layerscale_plain.py"),
         ("gpt_no_decay_groups.py", "gpt_no_decay_group_dropped.py"),
         ("curl_bilinear.py", "curl_bilinear_plain.py"),
         ("dreamer_world_model.py", "dreamer_reward_left_out.py")]


@pytest.mark.slow
@pytest.mark.parametrize(("clean", "buggy"), PAIRS, ids=[p[1] for p in PAIRS])
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path, clean, buggy):
    folder = project(tmp_path, buggy, clean)
    applied(folder, "unstepped")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder, atol=1e-8)
