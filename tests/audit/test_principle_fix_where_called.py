"""``toolkit audit SCRIPT``, the principle of the fix that belongs where the script calls: when
a gradient goes wrong inside a function or a method the script itself defines (a helper loss,
a method that writes a module's state), the line to fix is often not inside it but
(A) the call in the training loop, where the caller passes a value that carries this
iteration's graph and the published script passes it with ``.detach()``; or
(B) the method's own ``def``, when the published script decorates a method that only writes
state (it returns nothing) with ``@torch.no_grad()`` and the bug twin lost the decorator.
The failure names that line (the call for A, the ``def`` for B) and its edit there makes the
bug twin train exactly as the published script. The kind and wording of the finding are not
pinned here.

The cases (``tests/lens/audit/scripts/``), each a published script and a bug twin:

- (A, state) category anchors for domain adaptation (Zhang, Qiu, Chen, Hu and Tian,
  "Category Anchor-Guided Unsupervised Domain Adaptation for Semantic Segmentation",
  NeurIPS 2019; RogerZhangzz/CAG_UDA): class centroids of the source features kept as a moving
  average by ``CategoryAnchors.update(feats, labels)``, read by the next iteration's loss, which
  pulls each target feature to its nearest anchor. The bug twin's loop passes the features
  without ``.detach()`` (and keeps each backward's graph, ``retain_graph=True``, to run on):
  the fix is at the call.
- (A, target) class-wise self-knowledge distillation (Yun, Park, Lee and Shin, "Regularizing
  Class-wise Predictions via Self-knowledge Distillation", CVPR 2020, arXiv:2003.13964;
  alinlab/cs-kd): a KL helper ``kd_loss(student_logits, teacher_logits, T)`` whose soft target
  is the network's prediction on another sample of the same class. The bug twin's loop passes
  the partners' logits without ``.detach()``: the fix is at the call.
- (B, state) multi-loss weighting by coefficients of variation (Groenendijk, Karaoglu, Gevers
  and Mensink, "Multi-Loss Weighting with Coefficient of Variations", WACV 2021,
  arXiv:2009.01717; rickgroen/cov-weighting): ``CoVWeighting.update(losses)`` writes the loss
  weights and their running statistics and returns nothing; the next iterations' losses are
  weighted by them. The bug twin's ``update`` lost its ``@torch.no_grad()`` (and keeps each
  backward's graph to run on): the fix is the decorator, at the ``def`` line.

Must not be flagged: the three published scripts; online label smoothing (Zhang, Jiang, Hou,
Wei, Han, Li and Cheng, "Delving Deep into Label Smoothing", IEEE TIP 2021;
zhangchbin/OnlineLabelSmoothing), whose criterion's ``forward`` writes the epoch's sums under
``torch.no_grad()`` and returns the loss that reads the previous epoch's soft labels; and
class-wise self-knowledge distillation whose partners' forward runs under ``torch.no_grad()``,
passed to the helper with no ``.detach()`` at the call, having no graph to cut.
"""

from __future__ import annotations

import pytest
from script_audit import SCRIPTS, assert_trains_as, audit, cli, failures, project, recorded

#: (A, state): the anchors' call in the loop, and the backward the bug twin keeps the graph of
ANCHORS_BUGGY = "category_anchors_features_with_graph.py"
ANCHORS_CLEAN = "category_anchors.py"
ANCHORS_LINE = 88
ANCHORS_BUG = "    anchors.update(source_feats, ys)"
ANCHORS_FIX = "    anchors.update(source_feats.detach(), ys)"
ANCHORS_BACKWARD = 86

#: (A, target): the helper loss's call in the loop
KD_BUGGY = "cs_kd_target_with_graph.py"
KD_CLEAN = "cs_kd.py"
KD_LINE = 51
KD_BUG = "    consistency = kd_loss(logits, partner_logits, args.temperature)"
KD_FIX = "    consistency = kd_loss(logits, partner_logits.detach(), args.temperature)"

#: (B, state): the ``def`` of the method that lost its decorator (the bug twin's line; the
#: published script's decorator is on that line, its ``def`` on the next)
COV_BUGGY = "cov_weighting_update_with_graph.py"
COV_CLEAN = "cov_weighting.py"
COV_LINE = 53
COV_DEF = "    def update(self, losses):"
COV_DECORATOR = "    @torch.no_grad()"
COV_BACKWARD = 82

BACKWARD = "    loss.backward()"
BACKWARD_KEPT = "    loss.backward(retain_graph=True)"

PAIRS = [pytest.param(ANCHORS_BUGGY, ANCHORS_CLEAN, ANCHORS_LINE, id="anchors-call"),
         pytest.param(KD_BUGGY, KD_CLEAN, KD_LINE, id="kd-helper-call"),
         pytest.param(COV_BUGGY, COV_CLEAN, COV_LINE, id="cov-weighting-def")]


def lines(name: str) -> list[str]:
    return (SCRIPTS / name).read_text().splitlines()


def docstring_end(text: list[str]) -> int:
    """The number of the line that closes the module docstring (the scripts open with one)."""
    assert text[0].startswith('"""')
    return next(n for n, line in enumerate(text[1:], 2) if line.endswith('"""'))


def code_changes(buggy: list[str], clean: list[str]) -> list[int]:
    """The lines, past the docstrings (of one length in both), where two scripts of one length
    differ."""
    doc = docstring_end(clean)
    assert docstring_end(buggy) == doc and len(buggy) == len(clean)
    return [n for n, (a, b) in enumerate(zip(buggy, clean), 1) if a != b and n > doc]


def test_the_anchors_scripts_differ_only_at_the_call_and_the_kept_graph():
    buggy, clean = lines(ANCHORS_BUGGY), lines(ANCHORS_CLEAN)
    assert buggy[ANCHORS_LINE - 1] == ANCHORS_BUG and clean[ANCHORS_LINE - 1] == ANCHORS_FIX
    assert buggy[ANCHORS_BACKWARD - 1] == BACKWARD_KEPT
    assert clean[ANCHORS_BACKWARD - 1] == BACKWARD
    assert code_changes(buggy, clean) == [ANCHORS_BACKWARD, ANCHORS_LINE]


def test_the_distillation_scripts_differ_only_at_the_helper_s_call():
    buggy, clean = lines(KD_BUGGY), lines(KD_CLEAN)
    assert buggy[KD_LINE - 1] == KD_BUG and clean[KD_LINE - 1] == KD_FIX
    assert code_changes(buggy, clean) == [KD_LINE]


def test_the_weighting_scripts_differ_only_by_the_decorator_and_the_kept_graph():
    buggy, clean = lines(COV_BUGGY), lines(COV_CLEAN)
    doc = docstring_end(clean)
    assert docstring_end(buggy) == doc
    assert clean[COV_LINE - 1] == COV_DECORATOR
    assert clean[COV_LINE] == buggy[COV_LINE - 1] == COV_DEF
    # the published script without its decorator is the bug twin but for the kept graph
    undecorated = clean[:COV_LINE - 1] + clean[COV_LINE:]
    assert len(undecorated) == len(buggy)
    changed = [n for n, (a, b) in enumerate(zip(buggy, undecorated), 1) if a != b and n > doc]
    assert changed == [COV_BACKWARD]
    assert buggy[COV_BACKWARD - 1] == BACKWARD_KEPT and undecorated[COV_BACKWARD - 1] == BACKWARD
    assert COV_DECORATOR not in buggy


@pytest.mark.parametrize(("buggy", "clean", "line"), PAIRS)
def test_the_failure_names_the_line_where_the_script_calls_or_defines(tmp_path, buggy, clean,
                                                                      line):
    code, report = audit(tmp_path, SCRIPTS / buggy)
    assert code == 1
    found = failures(report)
    named = [f for f in found if any(at.startswith(f"{buggy}:{line}:") for at in f["at"])]
    assert named, [f["at"] for f in found]
    assert any(edit["start"][0] == line for f in named for edit in f["edits"]), \
        [f["edits"] for f in named]


@pytest.mark.parametrize("script", [
    ANCHORS_CLEAN, KD_CLEAN, COV_CLEAN, "online_label_smoothing.py",
    "cs_kd_partner_no_grad.py"],
    ids=["anchors", "kd-helper", "cov-weighting", "online-label-smoothing",
         "kd-partner-no-grad"])
def test_state_written_as_values_and_targets_cut_at_the_call_are_no_finding(tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and failures(report) == []


@pytest.mark.slow
@pytest.mark.parametrize(("buggy", "clean", "line"), PAIRS)
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path, buggy, clean, line):
    folder = project(tmp_path, buggy, clean)
    done = cli("--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote train.py" in done.stdout, done.stdout
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)
