"""``toolkit audit SCRIPT``, the principle of a parameter replaced after its optimizer was built:
a tensor the optimizer should train is set to new values by assigning a NEW ``nn.Parameter``
to the module's attribute (``self.codebook = nn.Parameter(fresh)``, ``layer.weight =
nn.Parameter(w)``) after the optimizer that holds its predecessor was built and while that
optimizer still trains the model. The optimizer keeps the old tensor, which no loss reaches any
more; the new one, which the forward reads and the backward gives gradient, is stepped by no
optimizer and never trains. The published code writes the new values INTO the existing
parameter (``copy_`` under ``torch.no_grad()``, or ``.data.copy_``). The fix is the replacing
assignment, made an in-place copy; moving the line that builds the optimizer below the
replacement is as right only where that single move trains as the published script (the
optimizer holds no state yet and steps nothing before the replacement). Where the optimizer
also steps the model before the replacement (a first phase, the steps before a restart), no
such move is right. The kind and wording of the finding are not pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the replacing assignment:

- Glow's activation normalisation with data-dependent initialisation (Kingma and Dhariwal,
  "Glow: Generative Flow with Invertible 1x1 Convolutions", NeurIPS 2018, arXiv:1807.03039;
  openai/glow), in a tiny 2-D flow with Real NVP's affine couplings (Dinh et al., ICLR 2017):
  the optimizer is built, then an initialisation pass over one batch sets each ActNorm's
  ``loc`` and ``logs`` from the batch's statistics, then the loop trains by maximum
  likelihood. The bug twin sets ``self.logs = nn.Parameter(...)`` in ``ActNorm.initialize``:
  the fix is that line (``self.logs.copy_(...)``), or, as well, the line that builds the
  optimizer moved below the initialisation pass (Adam holds no state before it). Single
  phase; the replacement happens before the loop: found at iteration 0.
- one round of the lottery ticket procedure (Frankle and Carbin, "The Lottery Ticket
  Hypothesis: Finding Sparse, Trainable Neural Networks", ICLR 2019, arXiv:1803.03635;
  facebookresearch/open_lth): two phases, a dense MLP trained, then each hidden layer pruned by
  magnitude and its survivors rewound to their initial values, then the sparse network
  retrained with the pruned weights' gradients masked, one plain SGD optimizer serving both
  phases. The bug twin rewinds by ``layer.weight = nn.Parameter(...)``: the fix is that line
  (``layer.weight.data.copy_(...)``); moving the optimizer below it would leave the dense phase
  without one. Found at the retraining's first iteration.
- a vector-quantised autoencoder (van den Oord et al., NeurIPS 2017) whose dead codes are
  restarted every ``--restart-every`` steps from the batch's encoder outputs (the random
  restarts of Dhariwal et al., "Jukebox", arXiv:2005.00341, openai/jukebox; the dead-code
  replacement of Huh et al., "Straightening Out the Straight-Through Estimator", ICML 2023,
  minyoungg/vqtorch). The bug twin restarts by ``self.codebook = nn.Parameter(fresh)``: the fix
  is that line (``self.codebook.copy_(fresh)``). The replacement repeats inside the loop; the
  bug begins after the tenth update, so the audit watches every iteration (``--watch 1``):
  found at iteration 10.

Must not be flagged: the three published scripts; the Glow flow whose ActNorms are set by new
parameters BEFORE the optimizer is built (``flow.parameters()`` then yields the new tensors);
the lottery ticket whose rewind sets new parameters and builds a NEW optimizer right after
(open_lth's fresh optimizer per round: the optimizer that steps the retraining holds the live
tensors); later-layer forgetting (Zhou et al., "Fortuitous Forgetting in Connectionist
Networks", ICLR 2022, hlml/fortuitous_forgetting), the classifier's last layer re-initialised
in place by ``reset_parameters()`` every few steps, one optimizer throughout.
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains (the two phases each
#: get theirs), or every iteration where the replacement comes back inside the loop
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: Glow's ActNorm: the replacing assignment, the line that builds the optimizer (moving it below
#: the initialisation pass is as right) and the initialisation pass's call
GLOW_BUGGY = "glow_actnorm_init_rewrapped.py"
GLOW_CLEAN = "glow_actnorm_init.py"
GLOW_LINE = 50
GLOW_BUG = "            self.logs = nn.Parameter(-torch.log(std + 1e-6))"
GLOW_FIX = "            self.logs.copy_(-torch.log(std + 1e-6))"
GLOW_OPTIMIZER = 105
GLOW_INIT_CALL = 106
GLOW_ALSO = (GLOW_OPTIMIZER,)
GLOW_NAMES = ("logs",)

#: the lottery ticket, two phases: the replacing assignment in the rewind, and the line that
#: builds the optimizer (which the dense phase needs: no move of it is right)
LTH_BUGGY = "lottery_ticket_rewind_rewrapped.py"
LTH_CLEAN = "lottery_ticket_rewind.py"
LTH_LINE = 77
LTH_BUG = '    layer.weight = nn.Parameter(initial[f"{name}.weight"] * masks[name])'
LTH_FIX = '    layer.weight.data.copy_(initial[f"{name}.weight"] * masks[name])'
LTH_OPTIMIZER = 61
LTH_NAMES = ("fc1.weight", "fc2.weight", "layer.weight")
#: the dense phase's iterations at the script's defaults: the retraining's first (0-based)
LTH_DENSE = 30

#: the codebook restarts: the replacing assignment, and the line that builds the optimizer
#: (which steps the codebook for ten iterations before the first restart)
VQ_BUGGY = "vq_dead_code_restart_rewrapped.py"
VQ_CLEAN = "vq_dead_code_restart.py"
VQ_LINE = 62
VQ_BUG = "            self.codebook = nn.Parameter(fresh)"
VQ_FIX = "            self.codebook.copy_(fresh)"
VQ_OPTIMIZER = 71
VQ_NAMES = ("codebook",)
#: the first iteration that trains with the replaced codebook, at the script's defaults
VQ_FIRST_RESTARTED = 10

PAIRS = [
    pytest.param(GLOW_BUGGY, GLOW_CLEAN, GLOW_LINE, GLOW_ALSO, GLOW_NAMES, STEPS, 0,
                 id="glow-actnorm-init"),
    pytest.param(LTH_BUGGY, LTH_CLEAN, LTH_LINE, (), LTH_NAMES, STEPS, LTH_DENSE,
                 id="lottery-ticket-two-phase"),
    pytest.param(VQ_BUGGY, VQ_CLEAN, VQ_LINE, (), VQ_NAMES, WATCH, VQ_FIRST_RESTARTED,
                 id="vq-dead-code-restart-in-loop"),
]
TWINS = [
    pytest.param(GLOW_BUGGY, GLOW_CLEAN, GLOW_LINE, GLOW_BUG, GLOW_FIX, id="glow-actnorm-init"),
    pytest.param(LTH_BUGGY, LTH_CLEAN, LTH_LINE, LTH_BUG, LTH_FIX,
                 id="lottery-ticket-two-phase"),
    pytest.param(VQ_BUGGY, VQ_CLEAN, VQ_LINE, VQ_BUG, VQ_FIX, id="vq-dead-code-restart-in-loop"),
]
#: where the optimizer also steps the model before the replacement: its construction may not move
NOT_MOVED = [
    pytest.param(LTH_BUGGY, LTH_LINE, LTH_OPTIMIZER, STEPS, id="lottery-ticket-two-phase"),
    pytest.param(VQ_BUGGY, VQ_LINE, VQ_OPTIMIZER, WATCH, id="vq-dead-code-restart-in-loop"),
]
CLEAN = [
    pytest.param(GLOW_CLEAN, STEPS, id="glow-actnorm-init"),
    pytest.param(LTH_CLEAN, STEPS, id="lottery-ticket-two-phase"),
    pytest.param(VQ_CLEAN, WATCH, id="vq-dead-code-restart-in-loop"),
    pytest.param("glow_actnorm_init_before_optimizer.py", STEPS,
                 id="glow-replaced-before-the-optimizer"),
    pytest.param("lottery_ticket_new_optimizer.py", STEPS,
                 id="lottery-ticket-new-optimizer-after-the-rewind"),
    pytest.param("later_layer_forgetting.py", WATCH, id="later-layer-forgetting-in-place"),
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
    """Whether one of the finding's names is one of ``wanted``, alone or as the dotted tail or
    part of a longer name (``layers.0.logs``, ``quantizer.codebook``)."""
    return any(f".{want}." in f".{name}." for name in finding["names"] for want in wanted)


def changed_lines(before: list[str], after: list[str]) -> set[int]:
    """The lines of ``before`` (1-based) an edit changed; an insertion counts as the line it
    follows."""
    out: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            out |= set(range(i1 + 1, i2 + 1)) if i2 > i1 else {i1}
    return out


def moved_below(before: list[str], after: list[str], line: int, below: int) -> bool:
    """Whether ``after`` is ``before`` with its line ``line`` moved, unchanged, below its line
    ``below``, and nothing else changed."""
    moved, anchor = before[line - 1], before[below - 1]
    if after.count(moved) != 1 or after.count(anchor) != 1:
        return False
    rest = before[:line - 1] + before[line:]
    j = after.index(moved)
    return after[:j] + after[j + 1:] == rest and j > after.index(anchor)


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_twins_differ_only_by_the_replacing_assignment(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


def test_the_glow_flow_replaced_before_the_optimizer_is_the_bug_twin_with_the_optimizer_moved():
    # the clean script that replaces the parameter before the optimizer is built is exactly
    # the ``also`` edit of the Glow bug twin: the optimizer's line moved below the init pass
    ours, theirs = lines(GLOW_BUGGY), lines("glow_actnorm_init_before_optimizer.py")
    doc = docstring_end(ours)
    assert moved_below(ours[doc:], theirs[doc:], GLOW_OPTIMIZER - doc, GLOW_INIT_CALL - doc)


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_names_the_replacing_assignment_and_the_replaced_tensor(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_is_found_at_the_first_update_it_spoils(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("buggy", "line", "optimizer", "options"), NOT_MOVED)
def test_the_optimizer_is_not_moved_where_it_steps_the_model_before_the_replacement(
        tmp_path, buggy, line, optimizer, options):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    assert named(report, buggy, {line}), [f["at"] for f in failures(report)]
    # the dense phase (the steps before the first restart) needs the optimizer where it is
    for f in failures(report):
        assert optimizer not in edit_lines(f), f["edits"]


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_parameters_written_in_place_or_replaced_before_their_optimizer_are_no_finding(
        tmp_path, script, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    folder = project(tmp_path, buggy, clean)
    done = cli(*options, "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    # the written edit: the replacing assignment rewritten, or (Glow) the optimizer's line
    # moved below the initialisation pass, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    on_line = changed_lines(before, after) <= {line}
    moved = buggy == GLOW_BUGGY and moved_below(before, after, GLOW_OPTIMIZER, GLOW_INIT_CALL)
    assert on_line or moved, "\n".join(difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
