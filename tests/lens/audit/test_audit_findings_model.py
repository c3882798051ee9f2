"""One findings model for both audits (issue 71): typed kinds, each failure or information
defined once; each edit with how it was proved (rerun / in process / on the graph / advice, as
ruff marks fixes safe or unsafe); ``--apply`` writes only the proved ones."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from toolkit.audit import (
    DeadParameter,
    Edit,
    FrozenTensor,
    HeldGraph,
    Leak,
    StepAudit,
    audit_step,
)
from toolkit.audit.cli import applicable, main
from toolkit.audit.findings import ScriptFinding
from toolkit.audit.kinds import (
    FAILURES,
    SAFE,
    SCRIPT_KINDS,
    STEP_KINDS,
    DeadKind,
    HeldKind,
    Kind,
    LeakKind,
    Proof,
)
from toolkit.audit.verify import rerun as watch_verify

SCRIPTS = Path(__file__).parent / "scripts"

#: the script audit's kinds as the dict ``KINDS`` gave them before issue 71
# the script audit's kinds before it ran the step audit's rules, and `held` (a graph kept in
# module state) and `constant_term` (a gradient penalty without a graph), which it reports
# since it does, `idle` (a part another phase trains, information), and `cut_keys` (a
# contrastive loss's keys cut from the network that makes its queries), and `never_trained` (a
# freeze under a condition that held at every step of the run), and `unused` (an output the
# method leaves out, information), and `drawn` (a sample drawn without its path, read by a
# loss that trains), and `void_cut` (a cut whose result nothing reads), and `unclipped` (a
# gradient clip before the backward it was meant for), and `truncated` (a recurrent state cut
# inside the unroll one loss reads), and `switched_off` (a part a later phase freezes by the
# script's own switch, information), and `unlearned` (a layer's buffer or plain tensor beside a
# learned sibling of its role), and `trained_mask` (a pruning mask an optimizer steps)
OLD_KINDS = {"leak": True, "stale": True, "cleared": True, "dead": True, "carried": True,
             "unstepped": True, "shared": True, "frozen": True, "aliased": True, "target": True,
             "wasted": False, "hand_updated": False, "held": True, "constant_term": True,
             "idle": False, "cut_keys": True, "never_trained": True, "unused": False,
             "drawn": True, "void_cut": True, "unclipped": True, "truncated": True,
             "switched_off": False, "unlearned": True,
             "trained_mask": True}


def _leak(**kw) -> Leak:
    fields = dict(loss="loss", optimizer="SGD", parameter="G.weight", shape=(3, 3),
                  grad_bytes=36, path=("Mean", "G.weight"), reason="not stepped",
                  fix="detach it", cut_at="the output of G")
    return Leak(**{**fields, **kw})


def _edit(old: str = "fake", new: str = "fake.detach()") -> Edit:
    return Edit("train.py", 8, 11, 8, 11 + len(old), old, new)


# --- kinds: one vocabulary, failure or information defined once -------------------------------

def test_the_script_kinds_and_their_failure_are_the_old_dict():
    assert {str(k): k.failure for k in SCRIPT_KINDS} == OLD_KINDS
    assert FAILURES == {k for k in Kind if k.failure}


def test_every_kind_is_reported_by_an_engine_and_has_a_meaning():
    assert STEP_KINDS | SCRIPT_KINDS == set(Kind)
    assert all(k.__doc__ and k.__doc__ != Kind.__doc__ for k in Kind)
    # the step audit's information: pass-through and a tensor every optimizer skips
    assert {k for k in STEP_KINDS if not k.failure} == {Kind.PASS_THROUGH, Kind.SKIPPED}


def test_only_a_run_edit_is_safe():
    assert SAFE == {Proof.RERUN, Proof.IN_PROCESS}
    assert not Proof.GRAPH.safe and not Proof.ADVICE.safe
    assert all(p.__doc__ and p.text for p in Proof)


def test_string_kinds_are_coerced_to_their_enums_and_still_compare_as_strings():
    leak = _leak(kind="written")
    assert leak.kind is LeakKind.WRITTEN and leak.kind == "written"
    dead = DeadParameter("SGD", "w", (2,), ("loss",), "torch.no_grad()", None, kind="no_grad")
    assert dead.kind is DeadKind.NO_GRAD and dead.kind in ("no_grad", "detach")
    held = HeldGraph("net", "moving_mean", "buffer", (3,), "add_", 8, 1, 0, "detach it")
    assert held.kind is HeldKind.BUFFER
    finding = ScriptFinding("stale", 0, "old gradient")
    assert finding.kind is Kind.STALE and finding.failure and finding.key[0] == "stale"
    assert _leak().kind is LeakKind.CUT and DeadParameter(
        "SGD", "w", (2,), ("loss",), "not used", None).kind is DeadKind.NO_GRAPH


def test_a_place_outside_modules_is_kept_with_its_words():
    phrase = "an item of a list kept in a closure variable"
    with pytest.raises(ValueError, match=r"HeldGraph\.kind"):  # a phrase is no kind
        HeldGraph("buffer", "[0]", phrase, (3,), "append", 8, 1, 1, "detach it")
    typed = HeldGraph("buffer", "[0]", HeldKind.KEPT, (3,), "append", 8, 1, 1, "detach it",
                      kept_in=phrase)
    assert typed.kind is HeldKind.KEPT and typed.kind == "kept"
    text = str(StepAudit(losses=("loss",), held=(typed,)))
    assert text.count(f"({phrase} of shape (3,))") == 1


@pytest.mark.parametrize("make, field, value", [
    (lambda: _leak(kind="cuts"), "Leak.kind", "'cuts'"),
    (lambda: DeadParameter("SGD", "w", (2,), ("l",), "c", None, kind="dead"),
     "DeadParameter.kind", "'dead'"),
    (lambda: HeldGraph("m", "b", "bufer", (3,), "w", 8, 1, 0, "f"), "HeldGraph.kind", "'bufer'"),
    (lambda: ScriptFinding("leaky", 0, "m"), "ScriptFinding.kind", "'leaky'"),
    (lambda: ScriptFinding("skipped", 0, "m"), "ScriptFinding.kind", "'skipped'"),  # the step's
    (lambda: _leak(edits=(_edit(),), proof="rerun"), "Leak.proof", "'rerun'"),
])
def test_an_unknown_kind_is_refused_naming_the_field_the_value_and_the_kinds(make, field,
                                                                             value):
    with pytest.raises(ValueError) as err:
        make()
    message = str(err.value)
    assert message.startswith(f"{field}: {value} is not a ") and "expected one of" in message


def test_an_unknown_kind_lists_the_kinds_there_are():
    with pytest.raises(ValueError, match="expected one of 'cut', 'written', 'optimizer'"):
        _leak(kind="nope")


# --- the step audit: each finding with its proof ---------------------------------------------

def test_a_step_findings_proof_follows_its_edits():
    assert _leak().proof is Proof.ADVICE                       # lines and fix text only
    graph = _leak(edits=(_edit(),))
    assert graph.proof is Proof.GRAPH                          # a rule's edit: proved on the graph
    run = _leak(edits=(_edit(),), proof="in_process")
    assert run.proof is Proof.IN_PROCESS
    # an edit taken off after its run failed leaves advice, whatever was said before
    assert dataclasses.replace(run, edits=()).proof is Proof.ADVICE
    frozen = FrozenTensor("SGD", "w", (2,), None, False)
    assert frozen.proof is Proof.ADVICE


def test_step_audit_lists_findings_with_their_kinds_and_prints_each_proof():
    proved = _leak(parameter="G.weight", edits=(_edit(),), proof=Proof.IN_PROCESS)
    graph = _leak(loss="other", parameter="H.weight", edits=(_edit("h", "h.detach()"),))
    passing = _leak(parameter="D.weight", kind="pass_through", cut_at=None)
    audit = StepAudit(losses=("loss", "other"), leaks=(proved, graph), pass_through=(passing,),
                      frozen=(FrozenTensor("SGD", "w", (2,), None, False),))
    assert [k for k, _ in audit.findings] == [Kind.LEAK, Kind.LEAK, Kind.PASS_THROUGH,
                                              Kind.SKIPPED]
    assert not audit.ok and audit.edits == (*proved.edits, *graph.edits)
    assert audit.safe_edits == proved.edits
    text = str(audit)
    assert "        proof: verified in process" in text
    assert "        proof: proved on the recorded graph" in text
    first = text.index(f"edit: {proved.edits[0]}")
    assert text.index("proof: verified in process") > first
    found = audit.to_dict()
    assert [f["proof"] for f in found["leaks"]] == ["in_process", "graph"]
    assert found["pass_through"][0]["proof"] == "advice"


def test_information_alone_is_clean():
    passing = _leak(kind="pass_through", cut_at=None)
    assert StepAudit(losses=("loss",), pass_through=(passing,)).ok


def test_a_real_step_audit_prints_how_its_edit_was_proved():
    torch.manual_seed(0)
    g, d = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(d.parameters(), lr=0.1)

    def step():
        fake = g(torch.randn(4, 3))
        return d(fake).mean()

    audit = audit_step(step, opt, modules={"g": g, "d": d})
    (leak, *_) = audit.leaks
    assert leak.kind is LeakKind.CUT and leak.edits
    # the verifier ran the edited step: its edit is proved in process, safe to apply
    assert leak.proof is Proof.IN_PROCESS and leak.proof.safe
    assert audit.safe_edits
    assert f"        proof: {leak.proof.text}" in str(audit)
    assert audit.to_dict()["leaks"][0]["proof"] == leak.proof.value


def test_a_step_edit_the_verifier_did_not_run_is_proved_on_the_graph_only(monkeypatch):
    from toolkit.audit.verify import in_process as verify

    monkeypatch.setattr(verify, "_failed", lambda *args: (set(), set()))
    torch.manual_seed(0)
    g, d = torch.nn.Linear(3, 3), torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(d.parameters(), lr=0.1)

    def step():
        return d(g(torch.randn(4, 3))).mean()

    (leak, *_) = audit_step(step, opt, modules={"g": g, "d": d}).leaks
    assert leak.edits and leak.proof is Proof.GRAPH and not leak.proof.safe


def test_a_step_audit_that_could_not_judge_carried_graphs_says_so():
    audit = StepAudit(losses=("loss",), leaks=(_leak(),), threads=("worker at train.py:3",))
    assert audit.not_checked and str(audit).splitlines()[-1].startswith(
        "not checked: carried graphs")
    assert audit.to_dict()["not_checked"] == list(audit.not_checked)


# --- the script audit: the proof derived, --apply writes only the safe ones ------------------

def _script_finding(verified: bool | None) -> ScriptFinding:
    edit = Edit("train.py", 4, 0, 4, 0, "", "    opt.zero_grad()\n")
    return ScriptFinding("leak", 0, "a leak", at=("train.py:4: loss.backward()",),
                         edits=(edit,), advice="call opt.zero_grad()", verified=verified,
                         why_not="" if verified else "the finding is still there")


def test_a_script_findings_proof_is_rerun_only_when_its_edits_passed_the_rerun():
    assert _script_finding(True).proof is Proof.RERUN
    assert _script_finding(False).proof is Proof.ADVICE
    assert _script_finding(None).proof is Proof.ADVICE
    assert ScriptFinding("dead", 0, "dead", verified=True).proof is Proof.ADVICE  # no edit
    assert _script_finding(True).to_dict()["proof"] == "rerun"


def test_the_printed_script_finding_says_how_each_edit_was_proved():
    shown = "\n".join(_script_finding(True).lines())
    assert "edit: train.py:4: insert before it: opt.zero_grad()" in shown
    assert "proof: verified by rerunning the script (--apply writes it)" in shown
    held = "\n".join(_script_finding(False).lines())
    assert "edit:" not in held and "not verified: the finding is still there" in held
    assert "proof: advice only (--apply does not write it)" in held


def test_apply_takes_only_findings_whose_proof_is_safe():
    ok, unproved, unrun = _script_finding(True), _script_finding(False), _script_finding(None)
    assert applicable([ok, unproved, unrun]) == [ok]


def _apply_with(tmp_path: Path, monkeypatch, verdict: tuple[bool, str]) -> tuple[int, str, str]:
    """``toolkit audit --apply`` of the DCGAN with a leak, its verifier's verdict forced."""
    shutil.copy(SCRIPTS / "dcgan_leak.py", tmp_path / "train.py")
    before = (tmp_path / "train.py").read_text(encoding="utf-8")
    monkeypatch.setattr(watch_verify, "verify", lambda *args, **kw: verdict)
    monkeypatch.chdir(tmp_path)
    code = main(["--apply", "train.py", "--niter", "3"])
    return code, before, (tmp_path / "train.py").read_text(encoding="utf-8")


def test_apply_never_writes_an_edit_its_rerun_did_not_verify(tmp_path, monkeypatch, capsys):
    code, before, after = _apply_with(tmp_path, monkeypatch, (False, "forced to fail"))
    out = capsys.readouterr().out
    assert code == 1 and after == before and not (tmp_path / "train.py.orig").exists()
    assert "not verified: forced to fail" in out and "proof: advice only" in out
    assert "--apply did not write the edits of 1 finding not verified" in out


def test_apply_writes_the_edit_its_rerun_verified(tmp_path, monkeypatch, capsys):
    code, before, after = _apply_with(tmp_path, monkeypatch, (True, ""))
    out = capsys.readouterr().out
    assert code == 1 and after != before and "optimizerG.zero_grad()" in after
    assert "proof: verified by rerunning the script" in out and "wrote train.py" in out
