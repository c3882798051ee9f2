"""as_constant and require_block: the core owns every cut decision."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from toolkit import (
    BlockNotSwitchableError,
    as_constant,
    disable_blocks,
    record_blocks,
    require_block,
)


def test_as_constant_records_no_graph_while_active():
    x = torch.randn(4, requires_grad=True)
    calls = []

    def quantity():
        calls.append(torch.is_grad_enabled())
        return x.amax()

    m = as_constant(quantity, name="demo.max")
    assert calls == [False]  # evaluated without a graph: nothing to cut afterwards
    assert not m.requires_grad and m.grad_fn is None
    assert torch.equal(m, x.amax())


def test_as_constant_keeps_the_graph_when_disabled():
    x = torch.tensor([1.0, 3.0, 2.0], requires_grad=True)
    calls = []

    def quantity():
        calls.append(torch.is_grad_enabled())
        return x.amax()

    with disable_blocks("demo.*"):
        m = as_constant(quantity, name="demo.max")
    assert calls == [True]
    assert torch.equal(torch.autograd.grad(m, x)[0], torch.tensor([0.0, 1.0, 0.0]))


def test_as_constant_cuts_an_input_returned_as_is():
    x = torch.randn(3, requires_grad=True)
    y = as_constant(lambda: x, name="demo.identity")
    assert not y.requires_grad and y.data_ptr() == x.data_ptr()


def test_as_constant_passes_args_and_nested_results():
    x = torch.randn(3, requires_grad=True)
    out = as_constant(lambda a, *, b: {"s": a * b, "t": (a, 2)}, x, b=3.0, name="demo.tree")
    assert torch.allclose(out["s"], 3 * x.detach()) and out["t"][1] == 2
    assert not out["s"].requires_grad and not out["t"][0].requires_grad


def test_as_constant_blocks_forward_mode():
    primal, tangent = torch.tensor(2.0), torch.tensor(1.0)
    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = as_constant(lambda: x * x, name="demo.fwd")
        assert fwAD.unpack_dual(y).tangent is None
        with disable_blocks("demo.*"):
            z = as_constant(lambda: x * x, name="demo.fwd")
        assert fwAD.unpack_dual(z).tangent.item() == 4.0


def test_as_constant_inside_func_grad():
    def f(x):
        return x * as_constant(lambda: x * x, name="demo.sq")

    x = torch.tensor(3.0)
    assert torch.func.grad(f)(x).item() == 9.0  # d/dx x * c = c = 9
    with disable_blocks("demo.*"):
        assert torch.func.grad(f)(x).item() == 27.0  # d/dx x^3


def test_as_constant_under_torch_compile_fullgraph():
    def f(x):
        m = as_constant(lambda: x.amax(), name="demo.cmax")
        return (x * m).sum()

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    x = torch.tensor([1.0, 4.0, 2.0], requires_grad=True)
    g_active = torch.autograd.grad(compiled(x), x)[0]
    with disable_blocks("demo.*"):
        g_disabled = torch.autograd.grad(compiled(x), x)[0]
    assert torch.equal(g_active, torch.full((3,), 4.0))
    assert torch.equal(g_disabled, torch.tensor([4.0, 11.0, 4.0]))  # + sum(x) at the argmax


def test_as_constant_records_the_name_active_or_disabled():
    with record_blocks() as names:
        as_constant(lambda: torch.ones(1), name="demo.a")
        with disable_blocks("demo.b"):
            as_constant(lambda: torch.ones(1), name="demo.b")
    assert names == ["demo.a", "demo.b"]


def test_as_constant_bad_arguments():
    with pytest.raises(TypeError, match="as_constant: fn must be callable, got int"):
        as_constant(3, name="demo.x")
    with pytest.raises(ValueError, match="as_constant: name must be dot-separated"):
        as_constant(lambda: 1, name="bad name")
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'name'"):
        as_constant(lambda: 1)


def test_require_block_passes_when_active_and_raises_when_disabled(monkeypatch):
    # only this test's blocks are known: one another test ran in this process ("other.block",
    # tests/core/test_stop_gradient.py) would match "other.*" and silence the warning
    monkeypatch.setattr(importlib.import_module("toolkit.core.stop_gradient"), "_EVER_SEEN", set())
    with record_blocks() as names:
        require_block("demo.fused", where="f", why="analytic backward")
    assert names == ["demo.fused"]
    with disable_blocks("demo.*"), pytest.raises(
            BlockNotSwitchableError,
            match=r"f: the block 'demo.fused' cannot be switched off here \(analytic backward\)"):
        require_block("demo.fused", where="f", why="analytic backward")
    with pytest.warns(UserWarning, match="'other.\\*' matches no known block"), \
            disable_blocks("other.*"):
        require_block("demo.fused", where="f", why="analytic backward")


def test_importing_the_toolkit_does_not_import_dynamo():
    import subprocess
    import sys

    code = "import sys, toolkit; print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
