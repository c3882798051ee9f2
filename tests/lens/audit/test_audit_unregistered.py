"""Tensors trained by no optimizer (#62): a proximal anchor kept as another model's own
parameters, read by the step's own code (``w - w_anchor``), leaks into that model, and the fix
is a cut where the step reads it; each printed edit, written to the step's file, trains as
the detached anchor does and audits clean.
"""

from __future__ import annotations

from pathlib import Path

import torch
from steps_on_disk import load

from toolkit import audit_step
from toolkit.lens.audit.fixes.edits import apply_edits

# L2-SP style fine-tuning (Li et al. 2018, "Explicit inductive bias for transfer learning"):
# the penalty pulls each weight towards the pretrained one. Written with the pretrained model's
# own parameters as the anchor, its gradient fills a model no optimizer steps.
ANCHOR = """
    import copy

    import torch
    from torch import nn
    from torch.nn import functional as F


    def build(seed, detached):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        pretrained = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
        model = copy.deepcopy(pretrained)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        if detached:
            anchors = [p.detach().clone() for p in pretrained.parameters()]
        else:
            anchors = list(pretrained.parameters())

        def step():
            x = torch.randn(4, 3, generator=gen)
            y = torch.randint(0, 2, (4,), generator=gen)
            penalty = 0.0
            for w, w0 in zip(model.parameters(), anchors):
                penalty = penalty + 0.01 * (w - w0).pow(2).sum()
            return F.cross_entropy(model(x), y) + penalty

        return model, pretrained, optimizer, step
"""


def _grads(model, step) -> list[torch.Tensor]:
    params = list(model.parameters())
    return [g.clone() for g in torch.autograd.grad(step(), params)]


def test_an_anchor_kept_as_another_models_parameters_leaks_and_is_cut_where_read(
        tmp_path: Path, seed: int) -> None:
    source = load(tmp_path / "anchor_step.py", ANCHOR)
    model, pretrained, optimizer, step = source.build(seed, detached=False)
    audit = audit_step(step, optimizer, modules={"model": model, "pretrained": pretrained})
    assert sorted(x.parameter for x in audit.leaks) == sorted(
        f"pretrained.{n}" for n, _ in pretrained.named_parameters()), str(audit)
    assert not audit.pass_through
    # the oracle: a real backward fills the pretrained model's gradients
    loss = step()
    assert all(g is not None and g.abs().sum() > 0 for g in torch.autograd.grad(
        loss, list(pretrained.parameters())))
    edits = list(dict.fromkeys(e for leak in audit.leaks for e in leak.edits))
    assert edits and all("w0" in e.old and e.line == e.end_line for e in edits), str(audit)
    assert all("where it is read" in leak.fix for leak in audit.leaks)
    fixed = load(tmp_path / "anchor_fixed.py",
                 apply_edits((tmp_path / "anchor_step.py").read_text("utf-8"), edits))
    model_a, pre_a, opt_a, step_a = fixed.build(seed, detached=False)
    model_b, _, _, step_b = source.build(seed, detached=True)
    for a, b in zip(_grads(model_a, step_a), _grads(model_b, step_b)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=0.0)
    assert audit_step(step_a, opt_a, modules={"model": model_a, "pretrained": pre_a}).ok


def test_the_detached_anchor_is_clean(tmp_path: Path, seed: int) -> None:
    source = load(tmp_path / "anchor_clean.py", ANCHOR)
    model, pretrained, optimizer, step = source.build(seed, detached=True)
    assert audit_step(step, optimizer, modules={"model": model, "pretrained": pretrained}).ok
