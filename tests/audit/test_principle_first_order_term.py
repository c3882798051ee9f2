"""``toolkit audit SCRIPT``, the principle of a term added to a loss that was computed from
``torch.autograd.grad(...)`` taken without ``create_graph=True``: the gradient it returns has no
graph, so the term (a gradient penalty) is a constant; the loss it is added to still trains
through its other terms, so nothing is dead, but the penalty trains nothing. The
``constant_term`` finding names the term (the variable that holds it), points at the
``torch.autograd.grad`` call, and its edit makes the call ``create_graph=True``, verified by
rerunning the script.

The case (``tests/lens/audit/scripts/``): a GAN with the R1 gradient penalty on real data
(Mescheder, Geiger and Nowozin 2018, arXiv:1801.04406; the term as in NVlabs/stylegan2-ada-pytorch
training/loss.py and rosinality/stylegan2-pytorch train.py ``d_r1_loss``), its bug twin taking
the gradient with ``create_graph=False``. The step audit (``audit_step``) says the same of one
step whose loss is ``ce + lam * penalty``.
Must not be flagged: the published R1 GAN; a first-order gradient used as a multiplicative
weight of a loss that has its graph (the adaptive weight of Esser, Rombach and Ommer 2021,
arXiv:2012.09841, CompVis/taming-transformers taming/modules/losses/vqperceptual.py); a
first-order gradient used as an input perturbation (FGSM, Goodfellow, Shlens and Szegedy 2015,
arXiv:1412.6572, as in Harry24k/adversarial-attacks-pytorch torchattacks/attacks/fgsm.py).
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from script_audit import SCRIPTS, applied, assert_trains_as, audit, failures, project, recorded
from torch import nn

from toolkit import audit_step
from toolkit.audit.fixes.script_edits import apply_to_text, edit_at

#: the lines of r1_gan_first_order.py's ``torch.autograd.grad(`` call (it spans two lines:
#: the call, then its ``create_graph=False`` keyword)
GRAD_LINES = (47, 48)


def test_a_penalty_taken_without_a_graph_is_named_and_given_its_graph(tmp_path):
    script = SCRIPTS / "r1_gan_first_order.py"
    text = script.read_text()
    lines = text.splitlines()
    assert "torch.autograd.grad(" in lines[GRAD_LINES[0] - 1]
    assert "create_graph=False" in lines[GRAD_LINES[1] - 1]
    code, report = audit(tmp_path, script)
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "constant_term"
    assert "r1_penalty" in found["names"]
    assert any(at.startswith(f"r1_gan_first_order.py:{n}:")
               for at in found["at"] for n in GRAD_LINES), found["at"]
    (edit,) = found["edits"]
    assert edit["start"][0] in GRAD_LINES
    # the edit makes the call create_graph=True, and changes nothing else
    fixed = apply_to_text(text, [edit_at(str(script), tuple(edit["start"]), tuple(edit["end"]),
                                         edit["new"])])
    assert fixed == text.replace("create_graph=False, retain_graph=True)",
                                 "create_graph=True, retain_graph=True)")


@pytest.mark.parametrize("script", ["r1_gan.py", "vqgan_adaptive_weight.py",
                                    "fgsm_autograd.py"])
def test_a_penalty_with_its_graph_a_gradient_as_a_weight_or_a_perturbation_is_clean(
        tmp_path, script):
    code, report = audit(tmp_path, SCRIPTS / script)
    assert code == 0 and not failures(report)


@pytest.mark.slow
def test_the_graph_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = project(tmp_path, "r1_gan_first_order.py", "r1_gan.py")
    applied(folder, "constant_term")
    assert not failures(recorded(folder, tmp_path / "fixed", "train.py"))
    assert_trains_as(folder)


def _penalized(create_graph: bool):
    """A classifier trained on cross-entropy plus a penalty on the squared norm of the
    gradient of its outputs with respect to its inputs (an input-gradient penalty, as R1
    penalizes the discriminator's)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 2), torch.randint(0, 3, (8,))
    lam = 0.1

    def step() -> torch.Tensor:
        inputs = x.clone().requires_grad_(True)
        out = model(inputs)
        ce = F.cross_entropy(out, y)
        grad = torch.autograd.grad(out.sum(), inputs, create_graph=create_graph,
                                   retain_graph=True)[0]
        penalty = grad.pow(2).sum(1).mean()
        return ce + lam * penalty

    return model, opt, step


def _line_of(fn, text: str) -> int:
    """The line number of ``fn``'s source line that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_the_step_audit_finds_a_constant_term_and_keeps_a_penalty_with_its_graph():
    model, opt, step = _penalized(create_graph=False)
    audit = audit_step(step, opt, modules={"model": model})
    assert not audit.ok, str(audit)
    assert isinstance(audit.constant_terms, tuple) and audit.constant_terms, str(audit)
    assert all(term.lines and term.edits for term in audit.constant_terms), str(audit)
    numbers = {line.number for term in audit.constant_terms for line in term.lines}
    call = _line_of(step, "torch.autograd.grad(")  # or its create_graph keyword, next line
    assert numbers & {call, call + 1}, str(audit)
    assert not audit.dead, str(audit)  # the cross-entropy trains every parameter

    model, opt, step = _penalized(create_graph=True)
    audit = audit_step(step, opt, modules={"model": model})
    assert audit.ok, str(audit)
    assert audit.constant_terms == ()
