"""The audit on training steps written from public repositories (issue 33), judged by the truth
each source confirms and by an oracle that runs real ``backward()`` on fresh copies.

Every case runs with the audit's default arguments (``modules=`` only names the tensors the way
the oracle does). A correct step must be ``ok``; a bug must be reported in its category; and the
audit's tensor sets must equal the oracle's: which named tensors outside each loss's optimizer
receive ``.grad`` (the audit's leaks and pass-through), which stepped tensors receive none (dead
and frozen), whether the second step's backward fails (carried graphs), and which buffers hold
a ``grad_fn`` after the step (held graphs).
"""

from __future__ import annotations

import functools
import importlib
import linecache
import os
import re
import sysconfig
import warnings
from pathlib import Path

import pytest
import torch
from realcode_common import RealCase, audit_sets, named, oracle, stepped_by

from toolkit import audit_step

# The corpus end to end: about 180 steps audited, each against an oracle that trains fresh
# copies. It runs with the slow tests (.ci/run, with the corpus's libraries installed); the
# audit's principles each have a fast test of their own in tests/lens/audit
pytestmark = pytest.mark.slow

#: every corpus module beside this file: ``realcode_<field>.py`` defines ``CASES`` (name ->
#: builder) and, for its bugs, ``TWINS`` (bug -> its fixed twin); a new file needs no change here
_MODULES = [importlib.import_module(path.stem)
            for path in sorted(Path(__file__).resolve().parent.glob("realcode_*.py"))
            if path.stem != "realcode_common"]
CASES = {name: build for module in _MODULES for name, build in module.CASES.items()}
assert len(CASES) == sum(len(module.CASES) for module in _MODULES), \
    "two corpus modules use the same case name"
TWINS: dict[str, str] = {bug: twin for module in _MODULES
                         for bug, twin in getattr(module, "TWINS", {}).items()}
#: the twins of the modules written before each module named its own
TWINS |= {
    "dcgan_no_detach": "dcgan", "sagan": "sagan_detached",
    "philtabor_ddqn": "philtabor_ddqn_no_grad", "easyrl_ddqn": "easyrl_ddqn_fixed",
    "easyrl_ddqn_same_net": "easyrl_ddqn_same_net_fixed",
    "actor_critic_no_item": "actor_critic",
    "word_language_model_no_repackage": "word_language_model",
    "nflows_realnvp_0_11": "nflows_realnvp_0_14",
    "handson_ddpg": "handson_ddpg_fixed", "ikostrikov_a2c_no_detach": "ikostrikov_a2c",
    "byol_readme": "byol", "morvan_rnn_no_repack": "morvan_rnn",
    "ugatit_no_detach": "ugatit_detached", "synsin_bn": "synsin_bn_fixed",
    "bolts_gan": "bolts_gan_detached", "tabor_dueling_ddqn": "tabor_dueling_ddqn_no_grad",
    "distilbert_teacher_grad": "distilbert", "dpo_reference_grad": "dpo",
    "transformer_xl_no_detach": "transformer_xl",
    "infini_attention_no_detach": "infini_attention",
    "infini_attention_buffer": "infini_attention", "awd_lstm_no_repackage": "awd_lstm",
    "srgan_no_detach": "srgan", "srgan_g_step_detach": "srgan",
    "dreamer_no_grad_rollout": "dreamer", "fixmatch_soft_no_detach": "fixmatch",
    "torchbeast_vtrace_grad": "torchbeast_vtrace", "simsiam_no_stop_grad": "simsiam"}


def _build(name: str, seed: int) -> RealCase:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated APIs the sources use (weight_norm hooks)
        return CASES[name](seed)


def _audit(case: RealCase):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # easy-rl's broadcasting mse_loss
        return audit_step(case.step, case.optimizers, modules=case.modules)


@functools.cache
def _audited(name: str, seed: int):
    """``(case, audit)``: one audit per case and seed in each test process, shared by the tests
    that only read it (each builds nothing else on the case; the oracle builds its own)."""
    case = _build(name, seed)
    return case, _audit(case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_verdict_is_the_truth_and_the_tensor_sets_are_the_oracles(name: str,
                                                                       seed: int) -> None:
    case, audit = _audited(name, seed)
    kinds = [k for k in ("leaks", "targets", "dead", "carried", "held") if getattr(audit, k)]
    if case.truth == "correct":
        assert audit.ok, str(audit)
        assert str(audit).startswith("audit_step: clean")
    else:
        assert not audit.ok and case.truth in kinds, str(audit)
    assert bool(audit.pass_through) == case.expect_pass_through or case.truth != "correct"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        truth = oracle(lambda: _build(name, seed))
    found = audit_sets(audit, case)
    assert found.outside == truth.outside, str(audit)
    assert found.no_grad == truth.no_grad, str(audit)
    # a tensor the audit calls dead in effect (behind a zero-derivative op) gets exact zeros
    assert all(found.zeros[loss] <= truth.zeros[loss] for loss in found.zeros), str(audit)
    assert found.backward_failed == truth.backward_failed, str(audit)
    assert found.held_buffers == truth.held_buffers, str(audit)


def test_the_corpus_spans_twenty_steps_ten_repositories_and_every_bug_has_its_twin() -> None:
    cases = {name: _build(name, 0) for name in CASES}
    repos = {case.source.split()[0] for case in cases.values()}
    assert len(cases) >= 20 and len(repos) >= 10, sorted(repos)
    bugs = {name for name, case in cases.items() if case.truth != "correct"}
    assert bugs == set(TWINS)
    assert all(cases[twin].truth == "correct" for twin in TWINS.values())
    assert all(case.confirms.startswith("https://") for case in cases.values())
    assert all("@" in case.source or "PyPI" in case.source for case in cases.values())


@pytest.mark.parametrize("norm", ["spectral_norm_hook", "spectral_norm", "weight_norm",
                                  "weight_norm_hook"])
def test_a_discriminator_under_each_normalisation_api_is_passed_through_never_cut(
        norm: str) -> None:
    audit = _audit(_build(f"dcgan_{norm}", 0))
    assert audit.ok and not audit.leaks
    passing = [x.parameter for x in audit.pass_through if x.loss == "g"]
    stored = {"spectral_norm_hook": "weight_orig", "weight_norm_hook": "weight_v",
              "spectral_norm": "parametrizations.weight.original",
              "weight_norm": "parametrizations.weight.original1"}[norm]
    assert sum(stored in p for p in passing) == 5  # one stored tensor per conv layer
    assert all(x.cut_at is None for x in audit.pass_through)
    strict = audit_step(_build(f"dcgan_{norm}", 0).step,
                        _build(f"dcgan_{norm}", 0).optimizers, allow_pass_through=False)
    assert all(x.cut_at is None for x in strict.leaks)  # no cut inside a weight's computation


def test_the_sagan_report_names_the_generator_and_no_spectral_norm_weight_as_cuttable() -> None:
    audit = _audit(_build("sagan", 0))
    assert {x.loss for x in audit.leaks} == {"d"}
    assert all(x.parameter.startswith("G.") for x in audit.leaks)
    assert {x.cut_at for x in audit.leaks} == {"the output of G[0] (shape (2, 3, 16, 16))"}
    assert {x.loss for x in audit.pass_through} == {"g"}
    assert all(x.parameter.startswith("D.") for x in audit.pass_through)
    # the power iteration writes u and v through .data: named, and not called an average
    text = str(audit)
    assert "weight_u" in text and "an average" not in text


def test_what_the_new_findings_say() -> None:
    ac = _audit(_build("actor_critic_no_item", 0))
    (target,) = ac.targets
    assert target.form == "a log-probability times a weight that carries gradient"
    assert target.terms == 5  # one per step of the episode
    assert "model.value_head.weight" in target.parameters and "behind it: model" in target.fix
    same = _audit(_build("easyrl_ddqn_same_net", 0))
    assert [t.form for t in same.targets] == ["MseLoss"]
    held = _audit(_build("nflows_realnvp_0_11", 0)).held
    assert {h.name for h in held} == {"running_mean", "running_var"}
    assert all(h.graph_bytes > 0 and h.older > 0 and ".detach()" in h.fix for h in held)
    carried = _audit(_build("word_language_model_no_repackage", 0)).carried
    assert sorted(c.source for c in carried) == ["the output of model[1][0]",
                                                 "the output of model[1][1]"]
    gp = _audit(_build("wgan_gp", 0))
    (note,) = [n for n in gp.notes if "leaf" in n]
    assert "shape (4, 2)" in note and "calc_gradient_penalty" in note
    moco = _audit(_build("moco", 0))
    assert len(moco.frozen) == 7 and all(f.written == "an average of itself and (.data =)"
                                         for f in moco.frozen)
    assert not moco.dead
    simsiam = _audit(_build("simsiam", 0))
    assert [f.parameter for f in simsiam.frozen] == ["model.encoder.fc.6.bias"]


def test_a_residual_gradient_target_is_accepted_when_asked() -> None:
    case = _build("easyrl_ddqn_same_net", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # easy-rl's broadcasting mse_loss
        audit = audit_step(case.step, case.optimizers, allow_trained_target=True)
    assert audit.ok, str(audit)


def test_the_audit_puts_the_nflows_buffers_back_without_their_graph() -> None:
    case = _build("nflows_realnvp_0_11", 0)
    buffers = {n: b.clone() for n, b in case.modules["flow"].named_buffers()}
    _audit(case)
    for name, b in case.modules["flow"].named_buffers():
        assert b.grad_fn is None and torch.equal(b, buffers[name]), name


HERE = Path(__file__).resolve().parent


def _marked(case: str) -> dict[str, set[int]]:
    """``file name -> line numbers`` of the corpus lines marked where a fix of ``case`` goes:
    ``# audit: fix here`` (every case that runs the line) or ``# audit: fix here [a, b]``
    (only cases ``a`` and ``b``, when a step is shared by twins)."""
    found: dict[str, set[int]] = {}
    for path in HERE.glob("realcode_*.py"):
        for i, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            match = re.search(r"# audit: fix here(?: \[([\w, ]+)\])?\s*$", line)
            if match and (match[1] is None or case in {c.strip() for c in match[1].split(",")}):
                found.setdefault(path.name, set()).add(i)
    return found


def _failures(audit):
    return [*audit.leaks, *audit.targets, *audit.dead, *audit.carried, *audit.held,
            *audit.shared]


@pytest.mark.parametrize("name", sorted(TWINS))
def test_every_fix_names_a_marked_line_of_the_users_code(name: str) -> None:
    # issue 42: every fix is printed with file.py:LINE and the text of that line, the line
    # where the user writes the fix (the corpus marks it), never a line inside a module's
    # forward that another loss also runs
    _, audit = _audited(name, 0)
    marked = _marked(name)
    lines = {(line.file, line.number) for finding in _failures(audit) for line in finding.lines}
    assert lines, str(audit)
    assert all(finding.lines for finding in _failures(audit)), str(audit)
    outside = sorted(f"{f}:{n}" for f, n in lines if f not in marked or n not in marked[f])
    assert not outside, str(audit)
    for finding in _failures(audit):
        for line in finding.lines:
            assert f"at:   {line}" in str(audit)
            assert line.text and line.text in (HERE / line.file).read_text("utf-8")


_STDLIB = os.path.join(os.path.realpath(sysconfig.get_paths()["stdlib"]), "")


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_printed_line_is_in_the_standard_library_or_an_installed_package(name: str) -> None:
    # issue 53: frames of Python's own modules (copy.py) and of installed packages (nflows)
    # are never where a fix goes; the user's line that leads there is
    _, audit = _audited(name, 0)
    for finding in _failures(audit):
        for line in finding.lines:
            path = os.path.realpath(line.path)
            assert not path.startswith(_STDLIB), (line, str(audit))
            assert not any(f"{os.sep}{d}{os.sep}" in path
                           for d in ("site-packages", "dist-packages")), (line, str(audit))
            assert line.file.startswith("realcode_"), (line, str(audit))


@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_fix_that_needs_several_cuts_names_every_marked_line_of_the_step(name: str) -> None:
    # three dead codebooks need three detaches removed, two readers of a memory two cuts:
    # every marked line inside the step function itself is printed
    case, audit = _audited(name, 0)
    printed = {(line.file, line.number) for f in _failures(audit) for line in f.lines}
    code = getattr(case.step, "__code__", None)
    if code is None:
        pytest.skip("the step is not a plain function")
    file = Path(code.co_filename).name
    numbers = [n for _, _, n in code.co_lines() if n is not None]
    own = {n for n in _marked(name).get(file, ()) if code.co_firstlineno <= n <= max(numbers)}
    missing = sorted(n for n in own if (file, n) not in printed)
    assert not missing, f"marked lines of the step not printed: {missing}\n{audit}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_fix_text_agrees_with_its_findings_facts(name: str) -> None:
    # issue 42: what a fix says is what the finding found: the modules it names hold the
    # tensors it is about, the tensors of a trained target are stepped by that optimizer, a
    # loss said to reach none of its optimizer's tensors reaches none, every line printed is
    # the line of the file it names, and the headline names only the losses with a finding
    case, audit = _audited(name, 0)
    names = named(case)
    optimizers = case.optimizers if isinstance(case.optimizers, dict) else {
        loss: case.optimizers for loss in audit.losses}
    stepped = {loss: {names.get(id(p)) for p in stepped_by(opt)}
               for loss, opt in optimizers.items()}
    for leak in audit.leaks:
        group = [x.parameter for x in audit.leaks if x.fix == leak.fix and x.loss == leak.loss]
        if "behind it: " in leak.fix:
            owners = leak.fix.split("behind it: ")[1].split(")")[0].split(", ")
            assert all(any(p.startswith(f"{o}.") or p == o for o in owners if o != "…")
                       for p in group if "…" not in owners), (leak.fix, group)
        if leak.cut_at is not None:
            assert leak.cut_at in leak.fix and leak.lines, str(audit)
        if "reaches none of the tensors" in leak.fix:
            assert not stepped[leak.loss] & {x.parameter for x in audit.pass_through}
            assert {d.parameter for d in audit.dead if leak.loss in d.losses} | {
                f.parameter for f in audit.frozen} >= stepped[leak.loss] - {None}
    for target in audit.targets:
        assert set(target.parameters) <= stepped[target.loss], str(audit)
    for finding in _failures(audit):
        for line in finding.lines:
            source = linecache.getline(line.path, line.number).strip()
            assert source == line.text, (line, source)
    failing = {x.loss for x in [*audit.leaks, *audit.targets, *audit.carried]}
    failing |= {loss for d in audit.dead for loss in d.losses}
    head = str(audit).splitlines()[0]
    if failing:
        assert all(f"'{loss}'" in head.split(";")[0] for loss in failing), head
        assert not any(f"'{loss}'" in head.split(";")[0] for loss in set(audit.losses) - failing)
