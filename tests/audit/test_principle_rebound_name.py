"""``toolkit audit SCRIPT``, the principle of a trained tensor's name rebound after its optimizer
was built: the tensor an optimizer trains is held by a plain NAME, not by a module (``delta``,
``z``), by an element of a plain list (``codes[i]``) or by an attribute of a plain object
(``model.weight`` where ``model`` is no ``nn.Module``), and the script sets it to new values by
binding that name to a NEW tensor (``z = nn.Parameter(project(z.data))``, ``delta =
delta.detach().clamp(-eps, eps).requires_grad_()``, ``codes[i] = nn.Parameter(...)``) after the
optimizer that holds its predecessor was built and while that optimizer still trains it. The
optimizer keeps stepping the old tensor, which the loss no longer reads; the new one, which the
loss reads and the backward gives gradient, is stepped by no optimizer and never moves. The
published code writes the new values INTO the existing tensor (``.data.clamp_``, ``.data.mul_``,
``.data.copy_``). The fix is the rebinding line, made an in-place write. Where the optimizer
steps the tensor before the rebinding (a first phase, the steps before a projection or a
reset), or where the rebinding comes back at every iteration, no move of the line that builds
the optimizer is right. The kind and wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the rebinding:

- a universal adversarial perturbation (Moosavi-Dezfooli, Fawzi, Fawzi and Frossard,
  "Universal Adversarial Perturbations", CVPR 2017, arXiv:1610.08401; LTS4/universal), learned
  by stochastic gradient ascent and projected onto the epsilon ball after every step as in
  Shafahi et al., "Universal Adversarial Training" (AAAI 2020, arXiv:1811.11304). Two phases: a
  classifier is trained (its own SGD) and frozen, then a plain tensor ``delta`` is trained by
  Adam to raise its loss. The bug twin projects by ``delta =
  delta.detach().clamp(-args.eps, args.eps).requires_grad_()``: the fix is that line
  (``delta.data.clamp_(-args.eps, args.eps)``). Adam steps ``delta`` once before the first
  rebinding: found at the perturbation phase's second iteration, 21 (the classifier's phase
  has 20).
- an auto-decoder with per-shape latent codes (Park et al., "DeepSDF: Learning Continuous
  Signed Distance Functions for Shape Representation", CVPR 2019, arXiv:1901.05103;
  facebookresearch/DeepSDF, whose ``nn.Embedding(max_norm=...)`` keeps each code inside the
  code bound, in place, where the codes are looked up), the codes here a plain list of tensors
  renormalised at the top of every step. The bug twin renormalises by ``codes[i] =
  nn.Parameter(codes[i].detach() * scale)``: the fix is that line
  (``codes[i].data.mul_(scale)``). The rebinding comes before the first forward and at every
  iteration after it: found at iteration 0, and no place of the optimizer's line is right.
- the Lookahead optimizer written out in the loop (Zhang, Lucas, Hinton and Ba, "Lookahead
  Optimizer: k steps forward, 1 step back", NeurIPS 2019, arXiv:1907.08610;
  michaelrzhang/lookahead), the fast weight an attribute of a plain object (a softmax
  regression, no module), reset to the slow weights every five steps. The bug twin resets by
  ``model.weight = slow.clone().requires_grad_()``: the fix is that line
  (``model.weight.data.copy_(slow)``). The first reset follows the fifth update, so the audit
  watches every iteration (``--watch 1``): found at iteration 5.
- a latent search on the sphere (Menon et al., "PULSE: Self-Supervised Photo Upsampling via
  Latent Space Exploration of Generative Models", CVPR 2020, arXiv:2003.03808;
  adamian98/pulse, its spherical optimizer), the projection after every step a function of the
  script that returns the latent, bound to ``z`` again where the loop calls it (``z =
  onto_sphere(z)``, in both twins). The bug twin's function makes a new tensor, ``z =
  nn.Parameter(z.detach() * scale)``: the fix is that line, inside the function
  (``z.data.mul_(scale)``, the function then returning the tensor it was given). Found at
  iteration 1.

Must not be flagged: the four published scripts; compressed sensing with a generative model
and random restarts (Bora, Jalal, Price and Dimakis, "Compressed Sensing using Generative
Models", ICML 2017, arXiv:1703.03208; AshishBora/csgm), each restart rebinding the latent ``z``
and building a NEW Adam over it right after; the projection of an image into a generator's
latent and noise maps (Karras et al., "Analyzing and Improving the Image Quality of StyleGAN",
CVPR 2020, arXiv:1912.04958; NVlabs/stylegan2 and rosinality/stylegan2-pytorch, projector.py),
the noise maps, a plain list, renormalised in place under ``torch.no_grad()`` after every step
and the noisy latent rebound each step without being trained; a deep image prior (Ulyanov,
Vedaldi and Lempitsky, "Deep Image Prior", CVPR 2018, arXiv:1711.10925;
DmitryUlyanov/deep-image-prior), whose input noise ``noise`` and input ``net_input`` are new
tensors each step that require no grad and no optimizer holds, only the network trained.
"""

from __future__ import annotations

import difflib
import re

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains (the two phases each
#: get theirs), or every iteration where the rebinding first comes after some updates
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: the universal perturbation, two phases: the rebinding projection, and the line that builds
#: the perturbation's Adam (which steps ``delta`` once before the first rebinding)
UAP_BUGGY = "universal_perturbation_rebound.py"
UAP_CLEAN = "universal_perturbation.py"
UAP_LINE = 63
UAP_BUG = "    delta = delta.detach().clamp(-args.eps, args.eps).requires_grad_()"
UAP_FIX = "    delta.data.clamp_(-args.eps, args.eps)"
UAP_OPTIMIZER = 56
UAP_NAMES = ("delta",)
#: the classifier's phase has 20 iterations at the script's defaults; the perturbation's first
#: is 20, and its second (0-based 21) is the first that trains with the rebound ``delta``
UAP_FIRST_REBOUND = 21

#: DeepSDF's codes in a plain list: the rebinding of each element, and the line that builds the
#: optimizer over the decoder and the list (the rebinding comes back at every iteration)
SDF_BUGGY = "deepsdf_codes_list_rebound.py"
SDF_CLEAN = "deepsdf_codes_list.py"
SDF_LINE = 57
SDF_BUG = "        codes[i] = nn.Parameter(codes[i].detach() * scale)"
SDF_FIX = "        codes[i].data.mul_(scale)"
SDF_OPTIMIZER = 50
SDF_NAMES = ("codes",)

#: Lookahead's fast weight, an attribute of a plain object: the rebinding reset, and the line
#: that builds the inner optimizer (which steps the weight five times before the first reset)
LA_BUGGY = "lookahead_fast_weights_rebound.py"
LA_CLEAN = "lookahead_fast_weights.py"
LA_LINE = 60
LA_BUG = "        model.weight = slow.clone().requires_grad_()"
LA_FIX = "        model.weight.data.copy_(slow)"
LA_OPTIMIZER = 49
LA_NAMES = ("weight",)
#: the first iteration that trains with the reset weight, at the script's defaults (``--k 5``)
LA_FIRST_RESET = 5

#: PULSE's projection, a function that returns the latent: the line in it that makes the
#: new tensor, the line in the loop that binds what it returns to ``z``, and the line that
#: builds the optimizer (which steps ``z`` once before the first projection in the loop)
PULSE_BUGGY = "pulse_sphere_latent_rebound.py"
PULSE_CLEAN = "pulse_sphere_latent.py"
PULSE_LINE = 42
PULSE_BUG = "    z = nn.Parameter(z.detach() * scale)"
PULSE_FIX = "    z.data.mul_(scale)"
PULSE_CALL = 56
PULSE_CALL_TEXT = "    z = onto_sphere(z)"
PULSE_OPTIMIZER = 50
PULSE_NAMES = ("z",)

PAIRS = [
    pytest.param(UAP_BUGGY, UAP_CLEAN, UAP_LINE, UAP_NAMES, STEPS, UAP_FIRST_REBOUND,
                 id="universal-perturbation-two-phase"),
    pytest.param(SDF_BUGGY, SDF_CLEAN, SDF_LINE, SDF_NAMES, STEPS, 0,
                 id="deepsdf-codes-list-element"),
    pytest.param(LA_BUGGY, LA_CLEAN, LA_LINE, LA_NAMES, WATCH, LA_FIRST_RESET,
                 id="lookahead-attribute-reset-late"),
    pytest.param(PULSE_BUGGY, PULSE_CLEAN, PULSE_LINE, PULSE_NAMES, STEPS, 1,
                 id="pulse-sphere-function-returns-new"),
]
TWINS = [
    pytest.param(UAP_BUGGY, UAP_CLEAN, UAP_LINE, UAP_BUG, UAP_FIX,
                 id="universal-perturbation-two-phase"),
    pytest.param(SDF_BUGGY, SDF_CLEAN, SDF_LINE, SDF_BUG, SDF_FIX,
                 id="deepsdf-codes-list-element"),
    pytest.param(LA_BUGGY, LA_CLEAN, LA_LINE, LA_BUG, LA_FIX, id="lookahead-attribute-reset-late"),
    pytest.param(PULSE_BUGGY, PULSE_CLEAN, PULSE_LINE, PULSE_BUG, PULSE_FIX,
                 id="pulse-sphere-function-returns-new"),
]
#: where the optimizer steps the tensor before the rebinding, or the rebinding comes back at
#: every iteration: its construction may not move
NOT_MOVED = [
    pytest.param(UAP_BUGGY, UAP_LINE, UAP_OPTIMIZER, STEPS, id="universal-perturbation-two-phase"),
    pytest.param(SDF_BUGGY, SDF_LINE, SDF_OPTIMIZER, STEPS, id="deepsdf-codes-list-element"),
    pytest.param(LA_BUGGY, LA_LINE, LA_OPTIMIZER, WATCH, id="lookahead-attribute-reset-late"),
    pytest.param(PULSE_BUGGY, PULSE_LINE, PULSE_OPTIMIZER, STEPS,
                 id="pulse-sphere-function-returns-new"),
]
CLEAN = [
    pytest.param(UAP_CLEAN, STEPS, id="universal-perturbation-two-phase"),
    pytest.param(SDF_CLEAN, STEPS, id="deepsdf-codes-list-element"),
    pytest.param(LA_CLEAN, WATCH, id="lookahead-attribute-reset-late"),
    pytest.param(PULSE_CLEAN, STEPS, id="pulse-sphere-function-returns-new"),
    pytest.param("csgm_random_restarts.py", WATCH, id="csgm-new-optimizer-per-restart"),
    pytest.param("stylegan2_projector_noise.py", STEPS, id="stylegan2-noise-in-place-no-grad"),
    pytest.param("deep_image_prior_noise.py", STEPS, id="deep-image-prior-untrained-noise"),
]


def lines(name: str) -> list[str]:
    return (SCRIPTS / name).read_text().splitlines()


def docstring_end(text: list[str]) -> int:
    """The number of the line that closes the module docstring (the scripts open with one)."""
    assert text[0].startswith('"""')
    return next(n for n, line in enumerate(text[1:], 2) if line.endswith('"""'))


def at_lines(finding: dict, script: str) -> set[int]:
    """The lines of ``script`` a finding is about."""
    return {int(at.split(":")[1]) for at in finding["at"] if at.startswith(f"{script}:")}


def edit_lines(finding: dict) -> set[int]:
    """The lines where a finding's edits start."""
    return {edit["start"][0] for edit in finding["edits"]}


def named(report: dict, script: str, allowed: set[int]) -> list[dict]:
    """The failures about one of the ``allowed`` lines of ``script``."""
    return [f for f in failures(report) if at_lines(f, script) & allowed]


def names_the_tensor(finding: dict, wanted: tuple[str, ...]) -> bool:
    """Whether one of the finding's names holds one of ``wanted`` as a whole word: alone, or as
    a part of a longer name, dotted or indexed (``model.weight``, ``codes.3``, ``codes[3]``)."""
    return any(want in re.split(r"\W+", name) for name in finding["names"] for want in wanted)


def changed_lines(before: list[str], after: list[str]) -> set[int]:
    """The lines of ``before`` (1-based) an edit changed; an insertion counts as the line it
    follows."""
    out: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            out |= set(range(i1 + 1, i2 + 1)) if i2 > i1 else {i1}
    return out


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_twins_differ_only_by_the_rebinding(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


def test_the_function_s_result_is_bound_to_the_latent_in_both_twins():
    # the loop's own line rebinds ``z`` to what the function returns, in the published script
    # too: there the function returns the tensor it was given, and the line changes nothing
    for name in (PULSE_BUGGY, PULSE_CLEAN):
        assert lines(name)[PULSE_CALL - 1] == PULSE_CALL_TEXT


@pytest.mark.parametrize(("buggy", "clean", "line", "names", "options", "iteration"), PAIRS)
def test_the_failure_names_the_rebinding_and_the_rebound_tensor(
        tmp_path, buggy, clean, line, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "names", "options", "iteration"), PAIRS)
def test_the_failure_is_found_at_the_first_update_it_spoils(
        tmp_path, buggy, clean, line, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("buggy", "line", "optimizer", "options"), NOT_MOVED)
def test_the_optimizer_is_not_moved_where_it_steps_the_tensor_before_the_rebinding(
        tmp_path, buggy, line, optimizer, options):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    assert named(report, buggy, {line}), [f["at"] for f in failures(report)]
    for f in failures(report):
        assert optimizer not in edit_lines(f), f["edits"]


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_tensors_written_in_place_or_rebound_with_a_new_optimizer_or_untrained_are_no_finding(
        tmp_path, script, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line", "names", "options", "iteration"), PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(
        tmp_path, buggy, clean, line, names, options, iteration):
    folder = project(tmp_path, buggy, clean)
    done = cli(*options, "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    # the written edit: the rebinding rewritten (in the function, for PULSE), and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    assert changed_lines(before, after) == {line}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
