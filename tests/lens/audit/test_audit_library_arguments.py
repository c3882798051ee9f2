"""A library call whose argument decides what its backward trains (issue 53): torchdiffeq's
``odeint_adjoint`` passes gradient only to ``adjoint_params`` (``func.parameters()`` when it is
not given). A tensor ``func`` reads that is not among them gets none, and the audit names the
user's ``odeint_adjoint(...)`` line and the argument, never a line inside the library.

torchdiffeq is not installed here. The test writes a minimal STAND-IN for it (an Euler solver
whose backward re-runs the solve and differentiates only ``y0`` and ``adjoint_params``, the
contract torchdiffeq documents) into a temporary ``site-packages`` folder, so that its frames
are an installed package's as the real library's would be. The user's step keeps the structure
of rtqichen/torchdiffeq#94 and PR #104 (https://github.com/rtqichen/torchdiffeq/pull/104):
a dynamics module holding a trained tensor as a plain attribute, not a parameter. The oracle is
a real ``backward()``: that tensor gets no ``.grad``; with the printed fix it does, and the
audit is clean.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from toolkit import audit_step

#: the stand-in (not torchdiffeq's code): only the contract of ``odeint_adjoint`` that matters
_STAND_IN = textwrap.dedent('''
    """STAND-IN for torchdiffeq, written by a test: not the library."""
    import torch


    def _euler(func, y0, t):
        ys = [y0]
        for i in range(len(t) - 1):
            ys.append(ys[-1] + (t[i + 1] - t[i]) * func(t[i], ys[-1]))
        return torch.stack(ys)


    class _Adjoint(torch.autograd.Function):
        @staticmethod
        def forward(ctx, func, y0, t, *params):
            ctx.func = func
            ctx.save_for_backward(y0, t, *params)
            return _euler(func, y0, t)

        @staticmethod
        def backward(ctx, grad):
            y0, t, *params = ctx.saved_tensors
            with torch.enable_grad():
                y0 = y0.detach().requires_grad_()
                ys = _euler(ctx.func, y0, t)
                grads = torch.autograd.grad(ys, (y0, *params), grad, allow_unused=True)
            return (None, grads[0], None, *grads[1:])


    def odeint_adjoint(func, y0, t, *, adjoint_params=None):
        if adjoint_params is None:
            adjoint_params = tuple(func.parameters())
        return _Adjoint.apply(func, y0, t, *adjoint_params)
''')


@pytest.fixture
def odeint_adjoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``odeint_adjoint`` of the stand-in, imported from a ``site-packages`` folder."""
    package = tmp_path / "site-packages" / "torchdiffeq"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_STAND_IN, "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    saved = sys.modules.pop("torchdiffeq", None)
    import torchdiffeq

    assert "site-packages" in torchdiffeq.__file__ and "STAND-IN" in torchdiffeq.__doc__
    yield torchdiffeq.odeint_adjoint
    sys.modules.pop("torchdiffeq", None)
    if saved is not None:
        sys.modules["torchdiffeq"] = saved


class _Dynamics(nn.Module):
    """dx/dt = a·x − b·x²: ``b`` a parameter, ``a`` a trained tensor held as an attribute."""

    def __init__(self, a: torch.Tensor, b: float) -> None:
        super().__init__()
        self.a = a  # not a parameter: func.parameters() leaves it out
        self.b = nn.Parameter(torch.tensor(b))

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.a * x - self.b * x ** 2


def _case(odeint_adjoint, seed: int, fixed: bool):
    torch.manual_seed(seed)
    a = torch.tensor(0.4, requires_grad=True)
    func = _Dynamics(a, 3.0)
    opt = torch.optim.Adam([a, *func.parameters()], lr=0.05)
    t, x0 = torch.linspace(0.0, 1.0, 5), torch.rand(3) + 0.5
    target = torch.rand(5, 3)

    def step() -> torch.Tensor:
        if fixed:
            sol = odeint_adjoint(func, x0, t, adjoint_params=(*func.parameters(), a))
        else:
            sol = odeint_adjoint(func, x0, t)
        return ((sol - target) ** 2).mean()

    return step, opt, a, func


def test_a_tensor_left_out_of_adjoint_params_is_dead_at_the_users_call(odeint_adjoint,
                                                                      seed: int) -> None:
    step, opt, a, func = _case(odeint_adjoint, seed, fixed=False)
    step().backward()
    assert a.grad is None and func.b.grad is not None  # the oracle
    a.grad = func.b.grad = None
    audit = audit_step(step, opt)
    (dead,) = audit.dead
    assert dead.kind == "library_argument"
    assert "without adjoint_params=" in dead.cut and "adjoint_params=" in dead.fix
    (line,) = dead.lines
    assert line.text == "sol = odeint_adjoint(func, x0, t)"
    assert line.path == __file__
    assert f"at:   {Path(__file__).name}:{line.number}: " in str(audit)
    assert "site-packages" not in str(audit)


def test_the_printed_fix_trains_the_tensor_and_audits_clean(odeint_adjoint, seed: int) -> None:
    step, opt, a, func = _case(odeint_adjoint, seed, fixed=True)
    step().backward()
    assert a.grad is not None and func.b.grad is not None
    a.grad = func.b.grad = None
    assert audit_step(step, opt).ok
