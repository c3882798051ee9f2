"""``toolkit audit SCRIPT``, the principle of a container of tensors with graph that outlives the
pass it was filled for, in cases written blind from the principle and the published loops: a
training loop often collects, during one pass (an episode, a rollout, a batch, a sequence),
tensors that carry autograd graph into a Python container (a list, a list attribute on the
model such as ``policy.saved_log_probs``, a list of namedtuples), and the loss at the end of the
pass reads the container. The container must be emptied (``del c[:]``, ``.clear()``) or made
anew once that loss has used it. If it is not (or only some of the parallel containers are),
the next pass's loss reaches graph made in earlier passes, before an optimizer step changed the
weights: the graph grows pass after pass, the loss sums stale terms, or, with ``zip`` over a
shorter list, old entries are paired with new data (without ``retain_graph=True`` the next
backward fails "Trying to backward through the graph a second time"; the twins keep their graph
so that the bug twins run to their end, their models built so that no stepped weight is saved
for backward). In each bug twin one line is wrong. The audit, run to the end and watching every
iteration (``--watch 1``), fails naming the line where the fix belongs (the bug's line; where
listed, the line that makes the container before the loop or empties its siblings is allowed as
well) and the tensors or containers concerned. The kind and wording of the finding are not
pinned here.

The bug twins (``tests/lens/audit/scripts/``), each differing from its correct twin in one line:

- REINFORCE with the buffers on the module (pytorch/examples, reinforcement_learning/reinforce.py;
  Williams 1992): ``finish_episode`` empties ``policy.rewards`` and ``policy.saved_log_probs``
  with one ``del``. The bug twin's ``del`` leaves out ``policy.saved_log_probs``: the list keeps
  every episode's log-probabilities with their graph, and ``zip`` pairs each episode's returns
  with the first episode's log-probabilities, reached again after every step. The fix is that
  line. ``policy``, ``saved_log_probs``.
- the actor-critic with ``SavedAction`` namedtuples (pytorch/examples,
  reinforcement_learning/actor_critic.py): ``finish_episode`` reads ``saved_actions =
  model.saved_actions`` and empties it through that name. The bug twin writes ``del
  saved_actions`` for ``del saved_actions[:]``: the local name is unbound, the model's list keeps
  every step's log-probability and value, and ``zip`` pairs the first episode's entries with each
  episode's returns. The fix is that line; the line that empties the sibling ``model.rewards``
  is allowed as well. ``model``, ``saved_actions``.
- A2C over n-step rollouts with plain lists for storage (Mnih et al., arXiv:1602.01783;
  ikostrikov/pytorch-a2c-ppo-acktr-gail, main.py and a2c_ppo_acktr/algo/a2c_acktr.py): the
  lists, made before the update loop, are emptied after each update. The bug twin's ``del`` is
  indented into the logging block (``if update % log_interval == 0:``): the lists are emptied
  every 4 updates only, and the loss of the updates between sums the rollouts of earlier
  updates, their graph made before the steps. The fix is that line; the line that makes the
  lists before the loop is allowed as well. ``actor``, ``critic``, ``log_probs``, ``values``,
  ``entropies``.
- an encoder-decoder with teacher forcing (pytorch/tutorials,
  intermediate_source/seq2seq_translation_tutorial.py): the decoder's outputs and the targets
  collected in two lists made anew for each batch (and once before the loop, for the print
  after it) and paired by ``zip``. The bug twin makes only ``targets`` anew: ``decoder_outputs``
  keeps growing, and ``zip`` pairs the first batch's outputs with every batch's targets. The fix
  is that line; the line that makes the lists before the loop is allowed as well. ``encoder``,
  ``decoder``, ``decoder_outputs``.
- linear classifier probes on a frozen network (Alain and Bengio, arXiv:1610.01644): the probes'
  losses collected in ``probe_losses``, summed, and cleared after each batch's step. The bug
  twin's ``.clear()`` is dedented to the end of the epoch: within an epoch each batch's loss
  sums the probes' losses of every batch before it. The fix is that line; the line that makes
  the list before the loop is allowed as well. ``probes``, ``probe_losses``.

Must not be flagged: the correct twins, and six more published loops whose containers keep
entries across passes without graph, or hold graph for one pass only:

- the DQN tutorial (pytorch/tutorials, intermediate_source/reinforcement_q_learning.py; Mnih et
  al., Nature 2015): a ``deque`` replay memory of transitions without graph for the whole run,
  the episode durations kept as ints;
- SimGAN (Shrivastava et al., arXiv:1612.07828, section 2.3): a history of ``refined.detach()``
  rows kept for the whole run and mixed into the discriminator's batches, the losses logged as
  floats;
- deep supervision (Lee et al., arXiv:1409.5185; Szegedy et al., arXiv:1409.4842): companion
  logits appended to ``model.aux_logits`` in each training forward pass and emptied with
  ``.clear()`` after the step;
- the seq2seq tutorial with a GRU encoder and decoder and gradient accumulation over 2 batches:
  ``decoder_outputs`` made for each batch and read by that batch's loss only;
- a critic warmed up with the actor fixed, then an actor-critic (Bahdanau et al.,
  arXiv:1607.07086; pytorch/examples, reinforcement_learning/actor_critic.py): two loops, each
  making its own lists for each episode;
- PPO with a rollout buffer (nikhilbarhate99/PPO-PyTorch, PPO.py; Schulman et al.,
  arXiv:1707.06347): the buffer filled under ``torch.no_grad()`` and emptied by its ``clear``
  after each update, each epoch's loss made from a fresh evaluation.

Without the audit, the other tests check that each bug is the bug: the twins differ in the
named line; the lines allowed besides it make or empty the containers in both twins; run to its
end from the same seed, each bug twin saves other weights than its correct twin; every script
runs to its end; with every ``backward()`` and every optimizer step watched, each bug twin's
backward passes reach graph nodes that an earlier backward pass already went through, before an
optimizer step since, and no correct script's do.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from script_audit import SCRIPTS, audit, failures, trained

#: the audit's options: run to the end and audit every iteration
WATCH = ("--watch", "1")

#: REINFORCE: the episode's ``del`` leaves out ``policy.saved_log_probs``
RM_BUGGY = "reinforce_module_lists_log_probs_kept.py"
RM_CLEAN = "reinforce_module_lists.py"
RM_LINE = 90
RM_BUG = "    del policy.rewards[:]"
RM_FIX = "    del policy.rewards[:], policy.saved_log_probs[:]"
RM_ALSO: tuple[int, ...] = ()
RM_ALSO_TEXT: tuple[str, ...] = ()
RM_NAMES = ("policy", "saved_log_probs")

#: the actor-critic: ``del saved_actions`` unbinds the name and leaves the model's list full
AC_BUGGY = "actor_critic_saved_actions_alias_unbound.py"
AC_CLEAN = "actor_critic_saved_actions.py"
AC_LINE = 100
AC_BUG = "    del saved_actions"
AC_FIX = "    del saved_actions[:]"
AC_ALSO = (99,)
AC_ALSO_TEXT = ("    del model.rewards[:]",)
AC_NAMES = ("model", "saved_actions")

#: A2C: the rollout lists emptied inside the logging block only
A2_BUGGY = "a2c_nstep_lists_emptied_when_logged.py"
A2_CLEAN = "a2c_nstep_lists.py"
A2_LINE = 98
A2_BUG = "        del log_probs[:], values[:], entropies[:], rewards[:], masks[:]"
A2_FIX = "    del log_probs[:], values[:], entropies[:], rewards[:], masks[:]"
A2_ALSO = (65,)
A2_ALSO_TEXT = ("log_probs, values, entropies, rewards, masks = [], [], [], [], []",)
A2_NAMES = ("actor", "critic", "log_probs", "values", "entropies")

#: seq2seq: only ``targets`` made anew for each batch, ``decoder_outputs`` made once
SQ_BUGGY = "seq2seq_decoder_outputs_made_once.py"
SQ_CLEAN = "seq2seq_decoder_outputs.py"
SQ_LINE = 69
SQ_BUG = "    targets = []"
SQ_FIX = "    decoder_outputs, targets = [], []"
SQ_ALSO = (65,)
SQ_ALSO_TEXT = ("decoder_outputs, targets = [], []",)
SQ_NAMES = ("encoder", "decoder", "decoder_outputs")

#: linear probes: the probes' losses cleared at the end of each epoch, not of each batch
LP_BUGGY = "linear_probes_per_layer_emptied_per_epoch.py"
LP_CLEAN = "linear_probes_per_layer.py"
LP_LINE = 61
LP_BUG = "    probe_losses.clear()"
LP_FIX = "        probe_losses.clear()"
LP_ALSO = (46,)
LP_ALSO_TEXT = ("probe_losses = []",)
LP_NAMES = ("probes", "probe_losses")

PAIRS = [
    pytest.param(RM_BUGGY, RM_CLEAN, RM_LINE, RM_ALSO, RM_NAMES,
                 id="reinforce-saved-log-probs-kept"),
    pytest.param(AC_BUGGY, AC_CLEAN, AC_LINE, AC_ALSO, AC_NAMES,
                 id="actor-critic-saved-actions-alias-unbound"),
    pytest.param(A2_BUGGY, A2_CLEAN, A2_LINE, A2_ALSO, A2_NAMES,
                 id="a2c-rollout-lists-emptied-when-logged"),
    pytest.param(SQ_BUGGY, SQ_CLEAN, SQ_LINE, SQ_ALSO, SQ_NAMES,
                 id="seq2seq-decoder-outputs-made-once"),
    pytest.param(LP_BUGGY, LP_CLEAN, LP_LINE, LP_ALSO, LP_NAMES,
                 id="probes-probe-losses-emptied-per-epoch"),
]
TWINS = [
    pytest.param(RM_BUGGY, RM_CLEAN, RM_LINE, RM_BUG, RM_FIX,
                 id="reinforce-saved-log-probs-kept"),
    pytest.param(AC_BUGGY, AC_CLEAN, AC_LINE, AC_BUG, AC_FIX,
                 id="actor-critic-saved-actions-alias-unbound"),
    pytest.param(A2_BUGGY, A2_CLEAN, A2_LINE, A2_BUG, A2_FIX,
                 id="a2c-rollout-lists-emptied-when-logged"),
    pytest.param(SQ_BUGGY, SQ_CLEAN, SQ_LINE, SQ_BUG, SQ_FIX,
                 id="seq2seq-decoder-outputs-made-once"),
    pytest.param(LP_BUGGY, LP_CLEAN, LP_LINE, LP_BUG, LP_FIX,
                 id="probes-probe-losses-emptied-per-epoch"),
]
#: the lines allowed besides the bug's, the same in both twins
ALSO = [
    pytest.param(RM_BUGGY, RM_CLEAN, RM_ALSO, RM_ALSO_TEXT, id="reinforce-saved-log-probs-kept"),
    pytest.param(AC_BUGGY, AC_CLEAN, AC_ALSO, AC_ALSO_TEXT,
                 id="actor-critic-saved-actions-alias-unbound"),
    pytest.param(A2_BUGGY, A2_CLEAN, A2_ALSO, A2_ALSO_TEXT,
                 id="a2c-rollout-lists-emptied-when-logged"),
    pytest.param(SQ_BUGGY, SQ_CLEAN, SQ_ALSO, SQ_ALSO_TEXT,
                 id="seq2seq-decoder-outputs-made-once"),
    pytest.param(LP_BUGGY, LP_CLEAN, LP_ALSO, LP_ALSO_TEXT,
                 id="probes-probe-losses-emptied-per-epoch"),
]
#: the correct scripts beyond the twins' correct halves
MORE_CLEAN = [
    "dqn_replay_deque.py",
    "simgan_history_buffer.py",
    "deep_supervision_aux_cleared.py",
    "seq2seq_decoder_outputs_accum.py",
    "critic_warmup_then_actor_critic.py",
    "ppo_rollout_buffer_clear.py",
]
CLEAN = [
    pytest.param(RM_CLEAN, id="reinforce-module-lists-emptied-per-episode"),
    pytest.param(AC_CLEAN, id="actor-critic-saved-actions-emptied-per-episode"),
    pytest.param(A2_CLEAN, id="a2c-rollout-lists-emptied-per-update"),
    pytest.param(SQ_CLEAN, id="seq2seq-decoder-outputs-made-per-batch"),
    pytest.param(LP_CLEAN, id="probes-probe-losses-cleared-per-batch"),
    pytest.param(MORE_CLEAN[0], id="dqn-replay-deque-without-graph"),
    pytest.param(MORE_CLEAN[1], id="simgan-history-of-detached-rows"),
    pytest.param(MORE_CLEAN[2], id="deep-supervision-aux-logits-cleared-per-step"),
    pytest.param(MORE_CLEAN[3], id="seq2seq-gru-decoder-outputs-per-batch-accumulated"),
    pytest.param(MORE_CLEAN[4], id="critic-warmup-then-actor-critic-lists-per-episode"),
    pytest.param(MORE_CLEAN[5], id="ppo-rollout-buffer-without-graph-cleared"),
]
CORRECT = [RM_CLEAN, AC_CLEAN, A2_CLEAN, SQ_CLEAN, LP_CLEAN, *MORE_CLEAN]
BUGGY = [RM_BUGGY, AC_BUGGY, A2_BUGGY, SQ_BUGGY, LP_BUGGY]


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


def in_part(name: str, wanted: tuple[str, ...]) -> bool:
    """Whether ``name`` holds one of ``wanted`` as a dotted part (``policy`` in
    ``policy.affine.weight``, ``saved_log_probs`` in ``policy.saved_log_probs``)."""
    return any(f".{want}." in f".{name}." for want in wanted)


def names_the_tensor(finding: dict, wanted: tuple[str, ...]) -> bool:
    """Whether one of the finding's names holds one of ``wanted`` as a dotted part."""
    return any(in_part(name, wanted) for name in finding["names"])


@pytest.mark.parametrize(("buggy", "clean", "line", "bug", "fix"), TWINS)
def test_the_twins_differ_only_by_one_line(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc
    assert ours[:doc] == theirs[:doc], "the twins share their docstring"
    assert len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b]
    assert changed == [line]


@pytest.mark.parametrize(("buggy", "clean", "also", "texts"), ALSO)
def test_the_lines_allowed_besides_make_or_empty_the_containers(buggy, clean, also, texts):
    for name in (buggy, clean):
        assert [lines(name)[n - 1] for n in also] == list(texts)


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names"), PAIRS)
def test_audit_the_failure_names_the_line_and_the_tensors(
        tmp_path, buggy, clean, line, also, names):
    code, report = audit(tmp_path, SCRIPTS / buggy, *WATCH)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize("script", CLEAN)
def test_audit_a_container_emptied_each_pass_or_without_graph_is_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script, *WATCH)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.oracle
def test_the_bug_twins_train_other_weights_than_the_correct_twins(tmp_path):
    scripts = [name for pair in TWINS for name in pair.values[:2]]
    for name in scripts:
        shutil.copy(SCRIPTS / name, tmp_path / name)
    saved = dict(zip(scripts, trained(tmp_path, *scripts)))
    for pair in TWINS:
        buggy, clean = pair.values[:2]
        ours, theirs = saved[buggy], saved[clean]
        assert ours.keys() == theirs.keys() and theirs
        assert any(not torch.allclose(ours[key], value) for key, value in theirs.items()), buggy


@pytest.mark.oracle
def test_the_scripts_run_to_their_end(tmp_path):
    scripts = [*CORRECT, *BUGGY]
    for name in scripts:
        shutil.copy(SCRIPTS / name, tmp_path / name)
    for name, tensors in zip(scripts, trained(tmp_path, *scripts)):
        assert tensors and all(torch.isfinite(t).all() for t in tensors.values()), name


#: runs a script (``sys.argv[1:]``) to its end with every ``backward()`` and every optimizer
#: step watched. Each backward walks the graph its roots reach (the AccumulateGrad nodes of the
#: leaves left out); a node is stale when an earlier backward already went through it and an
#: optimizer has stepped since that first time. The nodes are kept (with the steps counted
#: when first reached) so that their ids are never reused. Prints, as JSON, for each backward
#: the number of stale nodes it reached, and the number of steps.
_STALE = """\
import json
import runpy
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

seen, stale_per_backward, steps = {}, [], [0]


def reached(roots):
    out, stack = [], [r for r in roots if r is not None]
    marked = set()
    while stack:
        node = stack.pop()
        if id(node) in marked:
            continue
        marked.add(id(node))
        out.append(node)
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return out


backward = torch.autograd.backward


def watched_backward(tensors, *args, **kwargs):
    roots = (tensors,) if isinstance(tensors, torch.Tensor) else tuple(tensors)
    stale = 0
    for node in reached([t.grad_fn for t in roots]):
        if hasattr(node, "variable"):
            continue
        first = seen.get(id(node))
        if first is None:
            seen[id(node)] = (node, steps[0])
        elif first[0] is node and steps[0] > first[1]:
            stale += 1
    stale_per_backward.append(stale)
    return backward(tensors, *args, **kwargs)


def count_step(opt, args, kwargs):
    steps[0] += 1


torch.autograd.backward = watched_backward
register_optimizer_step_pre_hook(count_step)
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    if stop.code not in (None, 0):
        raise
print("STALE " + json.dumps({"stale": stale_per_backward, "steps": steps[0]}))
"""


def stale_nodes(script: str) -> dict:
    """``script`` run to its end with its backward passes and steps watched: for each backward,
    the number of graph nodes it reached that an earlier backward went through before a step
    (``stale``), and the number of steps (``steps``)."""
    done = subprocess.run([sys.executable, "-c", _STALE, str(SCRIPTS / script)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("STALE ")
    return json.loads(last[len("STALE "):])


@pytest.mark.oracle
@pytest.mark.parametrize("buggy", [pytest.param(pair.values[0], id=pair.id) for pair in TWINS])
def test_each_bug_twin_backward_reaches_graph_an_earlier_pass_went_through(buggy):
    watched = stale_nodes(buggy)
    stale = watched["stale"]
    assert watched["steps"] > 0 and len(stale) >= 8, watched
    assert sum(n > 0 for n in stale) >= len(stale) // 2, stale


@pytest.mark.oracle
@pytest.mark.parametrize("script", CLEAN)
def test_no_correct_script_backward_reaches_graph_of_an_earlier_pass(script):
    watched = stale_nodes(script)
    assert watched["steps"] > 0 and len(watched["stale"]) >= 8, watched
    assert not any(watched["stale"]), watched["stale"]
