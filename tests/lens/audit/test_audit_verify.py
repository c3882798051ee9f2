"""Every edit is run before it is printed (#62): the audit writes each set of edits into the
functions of the user's code they lie in, audits the step again from the same state, and prints the edits
only when the finding is gone, nothing new is found, the other stepped tensors keep their
gradients and the tensors the finding is about train."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step
from toolkit.audit.edit import Edit
from toolkit.audit.verify.in_process import edited_step


def _line_of(fn, text: str) -> int:
    code = fn.__code__
    lines = open(code.co_filename, encoding="utf-8").read().splitlines()
    return next(i for i, line in enumerate(lines, 1)
                if i >= code.co_firstlineno and text in line)


def _edit(fn, old: str, new: str) -> Edit:
    number = _line_of(fn, old)
    line = open(fn.__code__.co_filename, encoding="utf-8").read().splitlines()[number - 1]
    col = len(line[:line.index(old)].encode("utf-8"))
    return Edit("test_audit_verify.py", number, col, number, col + len(old.encode("utf-8")),
                old, new, fn.__code__.co_filename, ("from toolkit import stop_gradient",))


def test_an_edit_runs_with_the_closure_the_globals_and_the_binding_then_is_put_back() -> None:
    w = torch.tensor([2.0], requires_grad=True)

    def step(scale=3.0):
        y = w * w
        return (y * scale).sum()

    edit = _edit(step, "w * w", "w * stop_gradient(w)")
    new = edited_step(step, [edit])
    assert new is not None and new() == step()
    (g_new,) = torch.autograd.grad(new(), [w])
    (g_old,) = torch.autograd.grad(step(), [w])  # the step's own code again
    assert g_old.item() == 12.0 and g_new.item() == 6.0  # the edit took effect, nothing else
    partial = edited_step(functools.partial(step, scale=1.0), [edit])
    assert partial is not None and partial().item() == 4.0

    class Holder:
        def __init__(self) -> None:
            self.w = w

        def loss(self):
            return (self.w * self.w).sum()

    holder = Holder()
    method = edited_step(holder.loss, [_edit(Holder.loss, "self.w * self.w",
                                             "self.w * stop_gradient(self.w)")])
    assert method is not None and method().item() == 4.0
    (g,) = torch.autograd.grad(holder.loss(), [w])
    assert g.item() == 4.0  # put back


class _Scaled(nn.Linear):
    """A module whose ``forward`` calls ``super()`` and a helper method that reads a
    name-mangled attribute."""

    def __init__(self) -> None:
        super().__init__(1, 1, bias=False)
        self.__gain = 3.0
        with torch.no_grad():
            self.weight.fill_(2.0)

    def _square(self, y: torch.Tensor) -> torch.Tensor:
        return y * y * self.__gain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._square(super().forward(x))


def _cube(y: torch.Tensor) -> torch.Tensor:
    return y * y * y


def test_an_edit_in_a_forward_a_method_it_calls_or_a_function_of_the_file_is_run() -> None:
    """The function an edit lies in is rebuilt from the edited source (in its class: a
    zero-argument ``super()``, a name-mangled attribute) and runs wherever the step reaches
    it: a module's ``forward``, a method it calls, a module-level function, a closure."""
    net = _Scaled()
    x = torch.ones(1, 1)
    w = net.weight

    def helper(y):
        return y + y

    def step():
        return helper(_cube(net(x))).sum()

    def grad(fn) -> float:
        loss = fn()
        return torch.autograd.grad(loss, [w])[0].item() if loss.requires_grad else 0.0

    before = grad(step)  # d/dw 2 (3 w^2)^3 = 2 * 27 * 6 w^5
    assert before == 2 * 27 * 6 * 2.0 ** 5
    edits = {
        _Scaled._square: ("y * y", "y * stop_gradient(y)", before / 2),
        _Scaled.forward: ("super().forward(x)", "stop_gradient(super().forward(x))", 0.0),
        _cube: ("y * y * y", "y * stop_gradient(y * y)", before / 3),
        helper: ("y + y", "y + stop_gradient(y)", before / 2),
    }
    for fn, (old, new, expected) in edits.items():
        edited = edited_step(step, [_edit(fn, old, new)])
        assert edited is not None, fn
        assert grad(edited) == expected, fn
        assert grad(step) == before, fn  # put back
    together = edited_step(step, [_edit(fn, old, new) for fn, (old, new, _) in edits.items()
                                  if fn is not _Scaled.forward])
    assert together is not None and grad(together) == before / 12


def test_an_edit_outside_what_the_step_runs_is_not_run() -> None:
    """The line of the running code (here, the test) is not run again by the step: such an
    edit is not run, and printed as proved on the recorded graph."""
    w = torch.ones(1, requires_grad=True)
    here = test_an_edit_outside_what_the_step_runs_is_not_run

    def step():
        return (w * w).sum()

    assert edited_step(step, [_edit(here, "w = torch.ones(1, requires_grad=True)",
                                    "w = torch.ones(1)")]) is None


class _SimSiam(nn.Module):
    """SimSiam's symmetric loss in a module's ``forward``, both views normalised and neither
    cut (see ``test_an_edit_that_leaves_what_it_fixes_untrained_is_not_printed``)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
        self.pred = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 6))

    def d(self, p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return -(F.normalize(p, dim=1) * F.normalize(z, dim=1)).sum(1).mean()

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        z1, z2 = self.enc(x1), self.enc(x2)
        p1, p2 = self.pred(z1), self.pred(z2)
        return self.d(p1, z2) / 2 + self.d(p2, z1) / 2


class _Burgers(nn.Module):
    """The physics-informed step of ``test_no_printed_edit_breaks_the_step_it_fixes``, its
    residual written in a module's ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = self.net(x)
        (du,) = torch.autograd.grad(u.sum(), x, create_graph=True)
        return (du[:, 1:] + u * du[:, :1]).pow(2).mean()


@pytest.mark.parametrize("build", ["simsiam", "burgers"])
def test_each_edit_printed_in_a_forward_runs_and_trains_what_it_is_about(
        build: str, seed: int) -> None:
    """Whatever the audit finds in a module's ``forward``, each edit it prints was run: the
    step with it runs, and every tensor the optimizer steps still trains."""
    torch.manual_seed(seed)
    model: nn.Module = _SimSiam() if build == "simsiam" else _Burgers()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    if build == "simsiam":
        x1, x2 = torch.randn(3, 4), torch.randn(3, 4)

        def step():
            return model(x1, x2)
    else:
        x = torch.tensor(torch.rand(16, 2).numpy(), requires_grad=True).float()

        def step():
            return model(x)

    audit = audit_step(step, opt, modules=model)
    for kind in ("leaks", "targets", "dead", "carried", "held"):
        for found in getattr(audit, kind):
            if not found.edits:
                assert "not verified" in found.fix or not found.lines, str(audit)
                continue
            edited = edited_step(step, found.edits)
            assert edited is not None, str(audit)  # every printed edit lies where it runs
            grads = torch.autograd.grad(edited(), list(model.parameters()), allow_unused=True)
            assert all(g is not None and g.any() for g in grads), str(audit)


class _Distill(nn.Module):
    """A student trained toward a teacher's output that its ``forward`` does not cut."""

    def __init__(self) -> None:
        super().__init__()
        self.student, self.teacher = nn.Linear(4, 3), nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        target = self.teacher(x)
        return (self.student(x) - target).pow(2).mean()


def test_a_cut_in_a_forward_is_run_and_printed(seed: int) -> None:
    torch.manual_seed(seed)
    model = _Distill()
    opt = torch.optim.SGD(model.student.parameters(), lr=0.1)
    x = torch.randn(5, 4)

    def step():
        return model(x)

    audit = audit_step(step, opt, modules=model)
    edits = [e for f in audit.leaks for e in f.edits]
    assert audit.leaks and edits and all("not verified" not in f.fix for f in audit.leaks)
    code = _Distill.forward.__code__
    assert all(e.path == code.co_filename and e.line > code.co_firstlineno for e in edits)
    edited = edited_step(step, edits)
    assert edited is not None
    loss = edited()
    assert torch.autograd.grad(loss, list(model.teacher.parameters()), allow_unused=True) \
        == (None, None)  # the teacher is cut where it is made


def test_no_printed_edit_breaks_the_step_it_fixes() -> None:
    """A physics-informed step (maziarraissi/PINNs, Burgers identification) whose collocation
    points are copied once before the loop, ``torch.tensor(X, requires_grad=True).float()``,
    and differentiated inside the step: an edit that cut them would make ``autograd.grad``
    fail. Whatever the audit finds, each edit it prints, applied, runs and trains."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x = torch.tensor(torch.rand(16, 2).numpy(), requires_grad=True).float()

    def step():
        u = net(x)
        (du,) = torch.autograd.grad(u.sum(), x, create_graph=True)
        return (du[:, 1:] + u * du[:, :1]).pow(2).mean()

    audit = audit_step(step, opt)
    edits = [e for kind in ("leaks", "targets", "dead", "carried", "held")
             for f in getattr(audit, kind) for e in f.edits]
    new = edited_step(step, edits) if edits else step
    assert new is not None
    loss = new()
    grads = torch.autograd.grad(loss, list(net.parameters()), allow_unused=True)
    assert all(g is not None and g.any() for g in grads)


def test_a_cut_that_leaves_what_it_fixes_untrained_is_not_proposed(seed: int) -> None:
    """SimSiam's two normalised views with no cut on either side (Chen & He 2021): cutting
    each view where the encoder makes it passes the proof of each term alone, but together
    they leave the encoder no gradient, and each cuts the path by which the prediction trains
    it; neither is proposed. The cut proposed is where the similarity reads its target, and
    its edit, run in process, trains the encoder as the published step does."""
    from test_audit_self_targets import _simsiam

    step, opt, modules = _simsiam(seed, False, normalize=True)
    audit = audit_step(step, opt, modules=modules)
    (found,) = audit.targets
    assert found.edits and all(line.function == "d" for line in found.lines), str(audit)
    assert "where it is made" not in found.fix and "not verified" not in found.fix
