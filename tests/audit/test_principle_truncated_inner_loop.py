"""``toolkit audit SCRIPT``, the principle of an inner loop cut but for its last step (or its
last few). An iterative procedure inside the forward (a fixed-point solve, an unrolled
optimisation, an iterative refinement) whose published code backpropagates through the last
iteration alone, or the last K, cutting the state each earlier iteration hands on with
``.detach()`` (or running those iterations under ``torch.no_grad()``): the gradient is the
one-step, Jacobian-free or truncated approximation the method defines. A script that omits the
cut backpropagates through every iteration: it trains otherwise (and holds a graph that grows
with the iterations). The fix is the cut of the state carried between iterations; each case
also lists the lines where a single cut is as right (the same gradient; an inserted line counts
as the line it follows). A method that backpropagates through every iteration on purpose is no
finding: cutting there would be the bug. The kind and wording of the finding are not pinned
here.

Must not be flagged (``tests/lens/audit/scripts/``):

- MAML with its second-order meta-gradient (Finn, Abbeel and Levine, "Model-Agnostic
  Meta-Learning for Fast Adaptation of Deep Networks", ICML 2017, arXiv:1703.03400; cbfinn/maml
  and dragen1860/MAML-Pytorch): sine regression, three inner steps of gradient descent per task
  with ``create_graph=True``, the query loss of the adapted weights stepping the initial ones
  through every inner step and every inner gradient, on purpose.
- learned ISTA with tied weights (Gregor and LeCun, "Learning Fast Approximations of Sparse
  Coding", ICML 2010; AbhyudayPuri/learnable-ISTA), unfolded and trained end to end, with and
  without deep supervision (``--deep``).
- the published twin of each bug below.

Bug twins, each a published script and its twin differing in one line of code, the cut:

- a deep equilibrium classifier trained with Jacobian-free backpropagation (Fung et al., "JFB:
  Jacobian-Free Backpropagation for Implicit Networks", AAAI 2022, arXiv:2103.12803;
  typeal/fixed-point-networks; the one-step phantom gradient of Geng et al., "On Training
  Implicit Models", NeurIPS 2021, arXiv:2111.05177): twelve fixed-point iterations of
  ``z = tanh(W z + U x)``, each iterate detached, then one differentiable step. The bug twin
  does not detach the iterates: the fix is the solver's line (also: the differentiable step's,
  ``layer(z.detach(), x)``). The loss trains the layer (``W``, ``U``) through every iteration.
  Two loops, ``--steps 2``: a warm-up of four iterations trains the layer applied once from
  zeros (after the warm-up of Bai, Kolter and Koltun, "Deep Equilibrium Models", NeurIPS 2019;
  locuslab/deq); found at the second loop's first iteration, 4.
- a RAFT-style recurrent refinement of a one-dimensional flow (Teed and Deng, "RAFT: Recurrent
  All-Pairs Field Transforms for Optical Flow", ECCV 2020, arXiv:2003.12039; princeton-vl/RAFT,
  ``RAFT.forward``, which detaches the coordinates at the start of each iteration): a feature
  lookup around the estimate, a gated convolutional update, every iterate in the loss with
  decaying weights, the hidden state carrying gradient on purpose. The bug twin reads the
  estimate without ``.detach()`` where each iteration begins: the fix is that line (also: a
  ``flow = flow.detach()`` at the top of the loop or after its last line). The estimate trains
  the update operator and the feature encoder through the later iterations. Single loop,
  ``--steps 2``: found at iteration 0.
- data hyper-cleaning by a truncated hypergradient (Shaban, Cheng, Hatch and Boots, "Truncated
  Back-propagation for Bilevel Optimization", AISTATS 2019, arXiv:1810.10667, Algorithm 1; the
  task of Franceschi et al., ICML 2017, arXiv:1703.01785, lucfra/FAR-HO): per-example weight
  logits stepped by the validation loss of a linear classifier trained from zeros by an
  unrolled gradient descent, reversed through its last three steps alone, the earlier iterates
  detached. The bug twin does not detach them: the fix is that line. The horizon is three (all
  reversed, nothing to cut) for three hyper-iterations, then twelve, so the bug begins late;
  ``--watch 1``: found at iteration 3.
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains (the two loops each
#: get theirs), or every iteration where the bug begins later inside the one loop
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: JFB: the fixed-point iterations, each iterate detached; the one differentiable step
DEQ_BUGGY = "deq_jfb_unrolled.py"
DEQ_CLEAN = "deq_jfb.py"
DEQ_LINE = 66
DEQ_BUG = "        z = layer(z, x)"
DEQ_FIX = "        z = layer(z, x).detach()"
DEQ_ALSO = (67,)
#: the implicit layer's tensors, trained through every solver iteration
DEQ_NAMES = ("layer.W.weight", "layer.U.weight", "layer.U.bias")
#: the warm-up loop's iterations at the script's defaults: the second loop's first (0-based)
DEQ_WARMUP = 4

#: RAFT: the estimate read where each refinement iteration begins; the loop's first line and
#: its last (where an inserted ``flow = flow.detach()`` is as right)
RAFT_BUGGY = "raft_refine_flow_not_cut.py"
RAFT_CLEAN = "raft_refine.py"
RAFT_LINE = 83
RAFT_BUG = "        coords = positions + flow"
RAFT_FIX = "        coords = positions + flow.detach()"
RAFT_ALSO = (82, 87)
#: the update operator's and the feature encoder's tensors
RAFT_NAMES = ("update.gate.weight", "update.gate.bias", "update.cand.weight",
              "update.cand.bias", "update.head.weight", "update.head.bias", "fnet.0.weight",
              "fnet.0.bias", "fnet.2.weight", "fnet.2.bias")

#: truncated hyper-cleaning: the inner steps before the last K, their iterate detached
HYPER_BUGGY = "hyper_cleaning_truncated_all_steps.py"
HYPER_CLEAN = "hyper_cleaning_truncated.py"
HYPER_LINE = 70
HYPER_BUG = "        w = inner_step(w, cleaner)"
HYPER_FIX = "        w = inner_step(w, cleaner).detach().requires_grad_()"
HYPER_ALSO = ()
HYPER_NAMES = ("cleaner.example_logits",)
#: the first hyper-iteration with the full horizon, at the script's defaults (``--warmup 3``)
HYPER_FIRST = 3

PAIRS = [
    pytest.param(DEQ_BUGGY, DEQ_CLEAN, DEQ_LINE, DEQ_ALSO, DEQ_NAMES, STEPS, DEQ_WARMUP,
                 id="deq-jfb-second-loop"),
    pytest.param(RAFT_BUGGY, RAFT_CLEAN, RAFT_LINE, RAFT_ALSO, RAFT_NAMES, STEPS, 0,
                 id="raft-refinement"),
    pytest.param(HYPER_BUGGY, HYPER_CLEAN, HYPER_LINE, HYPER_ALSO, HYPER_NAMES, WATCH,
                 HYPER_FIRST, id="truncated-hyper-cleaning-after-warm-up"),
]
TWINS = [
    pytest.param(DEQ_BUGGY, DEQ_CLEAN, DEQ_LINE, DEQ_BUG, DEQ_FIX, id="deq-jfb-second-loop"),
    pytest.param(RAFT_BUGGY, RAFT_CLEAN, RAFT_LINE, RAFT_BUG, RAFT_FIX, id="raft-refinement"),
    pytest.param(HYPER_BUGGY, HYPER_CLEAN, HYPER_LINE, HYPER_BUG, HYPER_FIX,
                 id="truncated-hyper-cleaning-after-warm-up"),
]
#: inner loops trained through every iteration on purpose, by the audit's default options and
#: at every iteration
THROUGH_EVERY_ITERATION = [
    pytest.param("maml_second_order.py", (), STEPS, id="maml-steps"),
    pytest.param("maml_second_order.py", (), WATCH, id="maml-watch"),
    pytest.param("lista_tied.py", (), STEPS, id="lista-steps"),
    pytest.param("lista_tied.py", ("--deep",), WATCH, id="lista-deep-watch"),
]
CLEAN = [
    *THROUGH_EVERY_ITERATION,
    pytest.param(DEQ_CLEAN, (), STEPS, id="deq-jfb-published"),
    pytest.param(RAFT_CLEAN, (), STEPS, id="raft-refinement-published"),
    pytest.param(HYPER_CLEAN, (), WATCH, id="truncated-hyper-cleaning-published"),
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


def named(report: dict, script: str, allowed: set[int]) -> list[dict]:
    """The failures about one of the ``allowed`` lines of ``script``."""
    return [f for f in failures(report) if at_lines(f, script) & allowed]


def names_the_tensor(finding: dict, wanted: tuple[str, ...]) -> bool:
    """Whether one of the finding's names is one of ``wanted``, alone or as the dotted tail or
    part of a longer name (``net.layer.W.weight``)."""
    return any(f".{want}." in f".{name}." for name in finding["names"] for want in wanted)


def changed_lines(before: list[str], after: list[str]) -> set[int]:
    """The lines of ``before`` (1-based) an edit changed; an insertion counts as the line it
    follows."""
    out: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after).get_opcodes():
        if tag != "equal":
            out |= set(range(i1 + 1, i2 + 1)) if i2 > i1 else {i1}
    return out


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_twins_differ_only_by_the_cut_of_the_carried_state(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_names_the_cut_and_the_tensors_trained_through_every_iteration(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_is_found_at_the_first_iteration_the_loop_is_not_cut(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("script", "args", "options"), CLEAN)
def test_an_inner_loop_trained_through_on_purpose_or_already_cut_is_no_finding(
        tmp_path, script, args, options):
    code, report = audit(tmp_path, SCRIPTS / script, *options, args=args)
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
    # the written edit: one line, the fix line or one of the lines where a single cut is as
    # right, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
