"""Every edit is run before it is printed (issue 62): the audit writes each set of edits into a
copy of the step's function, audits that step again from the same state, and prints the edits
only when the finding is gone, nothing new is found, the other stepped tensors keep their
gradients and the tensors the finding is about train."""

from __future__ import annotations

import functools

import torch
from torch import nn

from toolkit import audit_step
from toolkit.lens.audit.fixes.edits import Edit
from toolkit.lens.audit.fixes.verify import edited_step


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


def test_an_edited_copy_keeps_the_closure_the_globals_and_the_binding() -> None:
    w = torch.tensor([2.0], requires_grad=True)

    def step(scale=3.0):
        y = w * w
        return (y * scale).sum()

    edit = _edit(step, "w * w", "w * stop_gradient(w)")
    new = edited_step(step, [edit])
    assert new is not None and new() == step()
    (g_old,) = torch.autograd.grad(step(), [w])
    (g_new,) = torch.autograd.grad(new(), [w])
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
    assert method is not None and method.__self__ is holder and method().item() == 4.0


def test_an_edit_outside_the_step_function_is_not_run() -> None:
    w = torch.ones(1, requires_grad=True)

    def helper():
        return w * w

    def step():
        return helper().sum()

    assert edited_step(step, [_edit(helper, "w * w", "w * stop_gradient(w)")]) is None


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


def test_an_edit_that_leaves_what_it_fixes_untrained_is_not_printed(seed: int) -> None:
    """SimSiam's two normalised views with no cut on either side (Chen & He 2021): the cut
    proved on the recorded graph (each view cut where it is made) leaves the encoder with no
    gradient at all when run; it is not printed, and the fix says so at the line."""
    from test_audit_self_targets import _simsiam

    step, opt, modules = _simsiam(seed, False, normalize=True)
    audit = audit_step(step, opt, modules=modules)
    (found,) = audit.targets
    assert found.lines and not found.edits, str(audit)
    assert "not verified" in found.fix
