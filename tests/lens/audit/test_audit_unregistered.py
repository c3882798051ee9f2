"""Tensors trained by no optimizer (#62).

A proximal anchor kept as another model's own parameters, read by the step's own code
(``w - w_anchor``), leaks into that model: the fix is a cut where the step reads it. A learned
tensor never registered on the model the optimizer is built from (modules in a plain dict, a
plain tensor made next to the model) is registered where it is made. Each printed edit,
written to the step's file, trains as the published form does and audits clean, and no tensor
leaves the optimizer.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch
from steps_on_disk import load

from toolkit import audit_step
from toolkit.audit.fixes.edits import apply_edits, edit_node
from toolkit.audit.record.unregistered import parameters_at

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


# Multi-task heads kept in a plain dict (the form of a per-task head table, as in the
# ModuleDict of facebookresearch/mmf's multi-task models): model.parameters() never holds
# them, so Adam(model.parameters()) never steps them.
HEADS = """
    import torch
    from torch import nn
    from torch.nn import functional as F


    class MultiTask(nn.Module):
        def __init__(self, tasks, registered):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
            heads = {task: nn.Linear(6, n) for task, n in tasks.items()}
            self.heads = nn.ModuleDict(heads) if registered else heads

        def forward(self, x):
            h = self.trunk(x)
            return {task: head(h) for task, head in self.heads.items()}


    def build(seed, registered):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = MultiTask({"a": 3, "b": 2}, registered)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            x = torch.randn(5, 4, generator=gen)
            out = model(x)
            return (F.cross_entropy(out["a"], torch.randint(0, 3, (5,), generator=gen))
                    + F.cross_entropy(out["b"], torch.randint(0, 2, (5,), generator=gen)))

        return model, optimizer, step
"""

# A learned temperature made as a plain tensor next to the model (the form of CLIP's
# logit_scale, openai/CLIP clip/model.py, written outside the model): the step divides the
# logits by it, no optimizer steps it.
TEMPERATURE = """
    import torch
    from torch import nn
    from torch.nn import functional as F


    def build(seed, registered):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = nn.Linear(4, 3)
        log_tau = torch.zeros((), requires_grad=True)
        if registered:
            model.log_tau = nn.Parameter(log_tau.detach().clone())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def step():
            x = torch.randn(6, 4, generator=gen)
            y = torch.randint(0, 3, (6,), generator=gen)
            tau = (model.log_tau if registered else log_tau).exp()
            return F.cross_entropy(model(x) / tau, y)

        return model, optimizer, step
"""


def _named_grads(model, optimizer, step) -> dict[str, torch.Tensor | None]:
    names = {id(p): n for n, p in model.named_parameters()}
    stepped = [p for group in optimizer.param_groups for p in group["params"]]
    grads = torch.autograd.grad(step(), stepped, allow_unused=True)
    return {names.get(id(p), f"#{i}"): g for i, (p, g) in enumerate(zip(stepped, grads))}


def _leaves(loss: torch.Tensor) -> list[torch.Tensor]:
    """The leaf tensors that require grad behind ``loss``."""
    found, seen, todo = [], set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            found.append(node.variable)
        todo += [n for n, _ in node.next_functions]
    return found


@pytest.mark.parametrize(("text", "kept", "made"), [
    (HEADS, "model.heads", "self.heads = "),
    (TEMPERATURE, "log_tau", "log_tau = torch.zeros"),
], ids=["heads_in_a_dict", "temperature_as_a_plain_tensor"])
def test_a_tensor_never_registered_is_registered_where_it_is_made(
        tmp_path: Path, seed: int, text: str, kept: str, made: str) -> None:
    path = tmp_path / "unregistered_step.py"
    source = load(path, text)
    model, optimizer, step = source.build(seed, registered=False)
    audit = audit_step(step, optimizer, modules={"model": model})
    # the oracle: every tensor a real backward fills that the optimizer does not step
    stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    leaves = [t for t in _leaves(step()) if id(t) not in stepped]
    assert sorted(x.shape for x in audit.leaks) == sorted(tuple(t.shape) for t in leaves), \
        str(audit)
    assert not audit.pass_through
    edits = list(dict.fromkeys(e for leak in audit.leaks for e in leak.edits))
    assert edits and all("torch.nn." in e.new for e in edits), str(audit)
    assert all(leak.fix.startswith(f"register {kept} on model where it is made")
               and leak.cut_at is None for leak in audit.leaks), str(audit)
    number = next(i for i, line in enumerate(path.read_text("utf-8").splitlines(), 1)
                  if line.strip().startswith(made))
    assert [e.line for e in edits] == [number]  # where it is made, the optimizer's line kept
    fixed = load(tmp_path / "registered_step.py", apply_edits(path.read_text("utf-8"), edits))
    model_a, optimizer_a, step_a = fixed.build(seed, registered=False)
    model_b, optimizer_b, step_b = source.build(seed, registered=True)
    before = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert before <= {id(p) for p in model.parameters()}  # nothing left the optimizer
    got, want = _named_grads(model_a, optimizer_a, step_a), _named_grads(
        model_b, optimizer_b, step_b)
    assert got.keys() == want.keys()
    for name, g in got.items():
        torch.testing.assert_close(g, want[name], rtol=1e-6, atol=0.0)
    assert audit_step(step_a, optimizer_a, modules={"model": model_a}).ok


def test_an_input_the_step_differentiates_is_not_registered(seed: int) -> None:
    """A physics-informed step: the coordinates require grad so that the step can take
    du/dx; they are fed to the network and are no learned tensor (pass-through)."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.linspace(-1, 1, 10).unsqueeze(1).requires_grad_()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        u = net(x)
        du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
        return (du - torch.cos(x)).pow(2).mean() + u[0].pow(2).sum()

    audit = audit_step(step, optimizer)
    assert not audit.leaks, str(audit)


def test_a_registration_is_run_before_it_is_printed_and_undone(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The edit is done on the live objects (the tensor made a parameter of the model, the
    optimizer built again by its line) and audited; then everything is put back."""
    from toolkit.audit.verify import in_process as verify

    ran: list[bool] = []
    original = verify.running

    @contextlib.contextmanager
    def counted(edits):
        with original(edits) as done:
            ran.append(done)
            yield done

    monkeypatch.setattr(verify, "running", counted)
    source = load(tmp_path / "temperature_step.py", TEMPERATURE)
    model, optimizer, step = source.build(seed, registered=False)
    cell = dict(zip(step.__code__.co_freevars, step.__closure__))["log_tau"]
    tensor, params = cell.cell_contents, [id(p) for p in model.parameters()]
    groups = [[id(p) for p in g["params"]] for g in optimizer.param_groups]
    audit = audit_step(step, optimizer)
    assert any(leak.edits for leak in audit.leaks) and True in ran, str(audit)
    assert cell.cell_contents is tensor and not isinstance(tensor, torch.nn.Parameter)
    assert [id(p) for p in model.parameters()] == params and not hasattr(model, "log_tau")
    assert [[id(p) for p in g["params"]] for g in optimizer.param_groups] == groups


# A learned scale registered on the model, left out of an optimizer built from the body's
# parameters alone: the fix joins it at the optimizer's line.
SCALE = """
    import torch
    from torch import nn
    from torch.nn import functional as F


    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 3)
            self.scale = nn.Parameter(torch.ones(()))

        def forward(self, x):
            return self.scale * self.body(x)


    def build(seed):
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        model = Scaled()
        optimizer = torch.optim.SGD(model.body.parameters(), lr=0.1)

        def step():
            x = torch.randn(6, 4, generator=gen)
            return F.cross_entropy(model(x), torch.randint(0, 3, (6,), generator=gen))

        return model, optimizer, step
"""


@pytest.mark.parametrize("drops", [False, True], ids=["joins", "drops_the_body"])
def test_an_optimizer_edit_that_takes_tensors_out_is_never_printed(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch, drops: bool) -> None:
    """Whatever edit of the optimizer's line a fix writes, it is run before it is printed
    (the line built again with it): one that leaves out a tensor the optimizer stepped is not
    printed, and the finding says it is not verified. A writer made to drop the body shows
    the gate; the real writer's edit (joins) passes it."""
    from toolkit.audit.fixes import chosen

    if drops:
        def join(line, optimizer, namespace, joining):  # keeps only the joining tensors
            found = parameters_at(line, optimizer)
            assert found is not None
            return edit_node(line, found[0], found[1], f"[{', '.join(joining)}]", ())
        monkeypatch.setattr(chosen, "join", join)
    source = load(tmp_path / "scale_step.py", SCALE)
    model, optimizer, step = source.build(seed)
    audit = audit_step(step, optimizer)
    (leak,) = audit.leaks
    assert leak.parameter == "model.scale", str(audit)
    if drops:
        assert not leak.edits and "not verified" in leak.fix, str(audit)
    else:
        (edit,) = leak.edits
        assert edit.new == "[*model.body.parameters(), model.scale]", str(audit)
    assert [p for g in optimizer.param_groups for p in g["params"]] == list(
        model.body.parameters())
