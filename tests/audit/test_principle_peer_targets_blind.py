"""``toolkit audit SCRIPT``, the principle of peers as each other's targets, in cases written
blind (from the principle and the published methods, not from the rule that judges them): when
two or more different networks are trained together and each is pulled towards the other's
prediction (deep mutual learning, online codistillation, collaborative distillation with an
ensemble teacher, a peer's prediction as a stabilization target), the published methods treat
the peer's prediction as a fixed target: it is cut from the graph (``.detach()``, computed
under ``torch.no_grad()``, or read from a stale copy), so that the term that teaches one network
does not also train its peer towards it. A bug twin that leaves out that cut trains each
teaching peer towards its student. The audit fails naming the line of the missing cut (where
the peer's prediction or the target made from it is made, or a line where the loss reads it,
each listed per case) and the stepped tensors of the network wrongly trained, and its
``--apply`` edit makes the script train as the published one. An agreement that trains both
sides on purpose, as published, is no finding: two dropout passes of one network pulled towards
each other, a consistency over one network's views, and an agreement between two different
networks that the published method trains through. The kind and wording of the finding are not
pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin that differ
in one line of code, the cut:

- deep mutual learning with a cohort of three students (Zhang, Xiang, Hospedales and Lu, "Deep
  Mutual Learning", CVPR 2018, arXiv:1706.00384, the K > 2 form; AberHu/Knowledge-Distillation-
  Zoo, train_dml.py, ``train``, ``criterionKD(out1, out2.detach())``), one SGD optimizer over
  the three students. The cut is in the helper ``mimicry`` the loop calls; the bug twin makes
  the target from the peer's logits uncut (``target = F.softmax(peer_logits, dim=1)``). The fix
  is that line; a cut where the KL reads the target, or of the peer's logits at the call, is as
  right. Found at iteration 0.
- online codistillation (Anil, Pereyra, Passos, Ormandi, Dahl and Hinton, "Large scale
  distributed neural network training through online distillation", ICLR 2018,
  arXiv:1804.03235, Algorithm 1; no code released, the stale copy of the peer replaced by its
  single-machine equivalent, a ``.detach()``), two models each with its own SGD optimizer, the
  distillation term only after a burn-in of three steps. The bug twin leaves model B's
  prediction on model A's batch uncut (``peer_for_a = model_b(x_a)``). The fix is that line; a
  cut where ``distill`` reads it is as right. The bug begins late: the audit watches every
  iteration (``--watch 1``); found at iteration 3.
- KDCL-MinLogit (Guo, Wang, Wu, Yu, Liang, Hu and Luo, "Online Knowledge Distillation via
  Collaborative Learning", CVPR 2020, arXiv:2003.05419, Section 3; no code released), the
  ensemble teacher made from the two students' logits. The bug twin leaves the teacher uncut
  (``teacher = torch.stack(shifted).min(dim=0).values``). The fix is that line; a cut of the
  soft target where it is made or where the KL reads it is as right. Found at iteration 0.
- Dual Student's stabilization constraint (Ke, Wang, Yan, Ren and Lau, "Dual Student: Breaking
  the Limits of the Teacher in Semi-supervised Learning", ICCV 2019, arXiv:1909.01804;
  ZHKKKe/DualStudent, dual_student.py, ``train_epoch``), each student's target its peer's
  prediction where it is unstable. The bug twin takes the right student's prediction uncut
  (``in_r = r_logit``): the left student's stabilization term trains the right student. The fix
  is that line; a cut where ``tar_l`` is made or where the left stabilization term reads it is as
  right. Found at iteration 0.
- deep mutual learning of two students (the same paper, Eq. 1-4, and the same repository), the
  targets computed under ``torch.no_grad()`` in the block that computes the logged accuracy. The
  bug twin writes the targets' line below that block (``targets = [F.softmax(z, dim=1) for z in
  logits]`` dedented). The fix is that line, into the block; a cut where ``pairs`` is made or
  where the KL reads the targets is as right (an edit of the block's own line is not: the
  targets' line is outside it). Found at iteration 0.

Must not be flagged: the five published scripts, and agreements that train both sides on
purpose: Fraternal Dropout (Zolna, Arpit, Suhubdy and Bengio, arXiv:1711.00066;
kondiz/fraternal-dropout, main.py, ``train``), R-Drop's symmetric KL of two dropout passes
(Liang et al., arXiv:2106.14448; dropreg/R-Drop, ``compute_kl_loss``), AugMix's Jensen-Shannon
consistency over one network's clean and augmented views (Hendrycks et al., arXiv:1912.02781;
google-research/augmix, cifar.py, ``train``), Deep Co-Training's Jensen-Shannon divergence
between two different networks (Qiao, Shen, Zhang, Wang and Yuille, arXiv:1803.05984;
AlanChou/Deep-Co-Training-for-Semi-Supervised-Image-Recognition, loss.py, ``loss_cot``), and the
co-regularisation of two different models towards their uncut average prediction (Zhou and
Chen, arXiv:2104.08656; wzhouad/NLL-IE, ``NLLModel.forward``).
"""

from __future__ import annotations

import difflib

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: the audit's options: the first two iterations of each loop that trains, or every iteration
#: where the distillation term enters after a burn-in
STEPS = ("--steps", "2")
WATCH = ("--watch", "1")

#: DML with three students: the peer's logits uncut in the helper ``mimicry``; the line where
#: the KL reads the target and the call with the peer's logits are as right
DML3_BUGGY = "dml_cohort_three_peer_kept.py"
DML3_CLEAN = "dml_cohort_three.py"
DML3_LINE = 38
DML3_ALSO = (39, 50)
DML3_BUG = "    target = F.softmax(peer_logits, dim=1)"
DML3_FIX = "    target = F.softmax(peer_logits.detach(), dim=1)"
DML3_NAMES = ("students",)
DML3_FIRST = 0

#: online codistillation: model B's prediction on model A's batch uncut; the line where
#: ``distill`` reads it is as right
COD_BUGGY = "online_codistillation_peer_kept.py"
COD_CLEAN = "online_codistillation.py"
COD_LINE = 52
COD_ALSO = (54,)
COD_BUG = "        peer_for_a = model_b(x_a)"
COD_FIX = "        peer_for_a = model_b(x_a).detach()"
COD_NAMES = ("model_b",)
#: the distillation term enters after a burn-in of three steps: iteration 3
COD_FIRST = 3

#: KDCL-MinLogit: the ensemble teacher uncut; the soft target's line and the KL's are as right
KDCL_BUGGY = "kdcl_minlogit_teacher_kept.py"
KDCL_CLEAN = "kdcl_minlogit.py"
KDCL_LINE = 43
KDCL_ALSO = (44, 47)
KDCL_BUG = "    teacher = torch.stack(shifted).min(dim=0).values"
KDCL_FIX = "    teacher = torch.stack(shifted).min(dim=0).values.detach()"
KDCL_NAMES = ("students",)
KDCL_FIRST = 0

#: Dual Student: the right student's prediction uncut as the left student's target; the lines
#: where ``tar_l`` is made and read are as right
DS_BUGGY = "dual_student_stabilization_peer_kept.py"
DS_CLEAN = "dual_student_stabilization.py"
DS_LINE = 72
DS_ALSO = (73, 76)
DS_BUG = "    in_r = r_logit"
DS_FIX = "    in_r = r_logit.detach()"
DS_NAMES = ("r_model",)
DS_FIRST = 0

#: DML with two students: the targets' line written below the ``torch.no_grad()`` block; the
#: lines where ``pairs`` is made and where the KL reads the targets are as right
DML2_BUGGY = "dml_pair_targets_out_of_no_grad.py"
DML2_CLEAN = "dml_pair_targets_no_grad.py"
DML2_LINE = 41
DML2_ALSO = (42, 43)
DML2_BLOCK = 39
DML2_BUG = "    targets = [F.softmax(z, dim=1) for z in logits]"
DML2_FIX = "        targets = [F.softmax(z, dim=1) for z in logits]"
DML2_BLOCK_TEXT = "    with torch.no_grad():"
DML2_NAMES = ("nets",)
DML2_FIRST = 0

PAIRS = [
    pytest.param(DML3_BUGGY, DML3_CLEAN, DML3_LINE, DML3_ALSO, DML3_NAMES, STEPS, DML3_FIRST,
                 id="dml-cohort-three-helper"),
    pytest.param(COD_BUGGY, COD_CLEAN, COD_LINE, COD_ALSO, COD_NAMES, WATCH, COD_FIRST,
                 id="online-codistillation-after-burn-in"),
    pytest.param(KDCL_BUGGY, KDCL_CLEAN, KDCL_LINE, KDCL_ALSO, KDCL_NAMES, STEPS, KDCL_FIRST,
                 id="kdcl-minlogit-teacher"),
    pytest.param(DS_BUGGY, DS_CLEAN, DS_LINE, DS_ALSO, DS_NAMES, STEPS, DS_FIRST,
                 id="dual-student-stabilization-target"),
    pytest.param(DML2_BUGGY, DML2_CLEAN, DML2_LINE, DML2_ALSO, DML2_NAMES, STEPS, DML2_FIRST,
                 id="dml-pair-targets-out-of-no-grad"),
]
TWINS = [
    pytest.param(DML3_BUGGY, DML3_CLEAN, DML3_LINE, DML3_BUG, DML3_FIX,
                 id="dml-cohort-three-helper"),
    pytest.param(COD_BUGGY, COD_CLEAN, COD_LINE, COD_BUG, COD_FIX,
                 id="online-codistillation-after-burn-in"),
    pytest.param(KDCL_BUGGY, KDCL_CLEAN, KDCL_LINE, KDCL_BUG, KDCL_FIX,
                 id="kdcl-minlogit-teacher"),
    pytest.param(DS_BUGGY, DS_CLEAN, DS_LINE, DS_BUG, DS_FIX,
                 id="dual-student-stabilization-target"),
    pytest.param(DML2_BUGGY, DML2_CLEAN, DML2_LINE, DML2_BUG, DML2_FIX,
                 id="dml-pair-targets-out-of-no-grad"),
]
CLEAN = [
    pytest.param(DML3_CLEAN, STEPS, id="dml-cohort-three-peers-detached"),
    pytest.param(COD_CLEAN, WATCH, id="online-codistillation-peers-detached"),
    pytest.param(KDCL_CLEAN, STEPS, id="kdcl-minlogit-teacher-detached"),
    pytest.param(DS_CLEAN, STEPS, id="dual-student-targets-detached"),
    pytest.param(DML2_CLEAN, STEPS, id="dml-pair-targets-no-grad"),
    pytest.param("fraternal_dropout.py", STEPS, id="fraternal-dropout-two-passes"),
    pytest.param("rdrop_symmetric_kl.py", STEPS, id="rdrop-symmetric-kl"),
    pytest.param("augmix_jsd.py", STEPS, id="augmix-jensen-shannon-views"),
    pytest.param("deep_co_training_jsd.py", STEPS, id="deep-co-training-jensen-shannon"),
    pytest.param("coregularization_avg_prob.py", STEPS, id="coregularization-average-uncut"),
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
    """Whether one of the finding's names holds one of ``wanted`` as a dotted part
    (``encoder`` in ``encoder.0.weight``, ``rot_head`` in ``model.rot_head.weight``)."""
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
def test_the_twins_differ_only_by_the_cut(buggy, clean, line, bug, fix):
    ours, theirs = lines(buggy), lines(clean)
    doc = docstring_end(theirs)
    assert docstring_end(ours) == doc and len(ours) == len(theirs)
    assert ours[line - 1] == bug and theirs[line - 1] == fix
    changed = [n for n, (a, b) in enumerate(zip(ours, theirs), 1) if a != b and n > doc]
    assert changed == [line]


def test_the_no_grad_block_is_above_the_targets_line_in_both_twins():
    # the published script computes the targets in the block; the bug twin's targets' line is
    # the line under the block's last line, dedented
    for name in (DML2_BUGGY, DML2_CLEAN):
        assert lines(name)[DML2_BLOCK - 1] == DML2_BLOCK_TEXT
    assert lines(DML2_BUGGY)[DML2_LINE - 2].startswith("        accuracy = ")


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_names_the_cut_and_the_tensors(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1, [f["at"] for f in failures(report)]
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert any(names_the_tensor(f, names) for f in found), [f["names"] for f in found]


@pytest.mark.parametrize(("buggy", "clean", "line", "also", "names", "options", "iteration"),
                         PAIRS)
def test_the_failure_is_found_at_the_first_iteration(
        tmp_path, buggy, clean, line, also, names, options, iteration):
    code, report = audit(tmp_path, SCRIPTS / buggy, *options)
    assert code == 1
    found = named(report, buggy, {line, *also})
    assert found, [f["at"] for f in failures(report)]
    assert min(f["iteration"] for f in found) == iteration


@pytest.mark.parametrize(("script", "options"), CLEAN)
def test_a_published_cut_or_an_agreement_trained_on_purpose_is_no_finding(
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
    # the written edit: one line, the cut or a line whose edit is as right, and nothing else
    before = lines(buggy)
    after = (folder / "train.py").read_text().splitlines()
    changed = changed_lines(before, after)
    assert len(changed) == 1 and changed <= {line, *also}, "\n".join(
        difflib.unified_diff(before, after, lineterm=""))
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py", *options))
    assert_trains_as(folder, atol=1e-5)
