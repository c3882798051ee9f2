"""observe_cuts: the public hook through which the lens and the audit see every block."""

from __future__ import annotations

import threading

import pytest
import torch

from toolkit import as_constant, disable_blocks, observe_cuts, require_block, stop_gradient


def _cut(seen: list, tag: str = "cut"):
    def on_cut(x, name):
        seen.append((tag, name))
        return x.detach()
    return on_cut


def _open(seen: list, tag: str = "open"):
    def on_open(x, name):
        seen.append((tag, name))
        return x
    return on_open


def test_each_hook_sees_its_kind_of_block_with_its_name():
    seen: list = []
    w = torch.tensor(2.0, requires_grad=True)
    with observe_cuts(on_cut=_cut(seen), on_open=_open(seen)):
        stop_gradient(w, name="demo.a")
        stop_gradient(w)
        as_constant(lambda: 3 * w, name="demo.c")
        with disable_blocks("demo.*"):
            stop_gradient(w, name="demo.a")
            as_constant(lambda: 3 * w, name="demo.c")
        require_block("demo.r", where="test", why="no value, no hook")
    assert seen == [("cut", "demo.a"), ("cut", None), ("cut", "demo.c"),
                    ("open", "demo.a"), ("open", "demo.c")]


def test_what_the_hook_returns_is_what_the_block_returns():
    w = torch.tensor(2.0, requires_grad=True)
    marker = torch.tensor(7.0)
    with observe_cuts(on_cut=lambda x, name: marker, on_open=lambda x, name: "opened"):
        assert stop_gradient(w, name="demo.a") is marker
        with disable_blocks():
            assert stop_gradient(w, name="demo.a") == "opened"


def test_as_constant_hands_on_cut_the_graph_behind_the_cut():
    w = torch.tensor(2.0, requires_grad=True)
    given = []
    with observe_cuts(on_cut=lambda x, name: given.append(x) or x.detach()):
        value = as_constant(lambda: 3 * w, name="demo.c")
    assert given[0].grad_fn is not None  # fn ran in the caller's grad mode
    assert not value.requires_grad and value.item() == 6.0


def test_a_hook_left_none_keeps_the_outer_one_and_inner_hooks_replace_outer_ones():
    seen: list = []
    w = torch.tensor(2.0, requires_grad=True)
    with observe_cuts(on_cut=_cut(seen, "outer cut"), on_open=_open(seen, "outer open")):
        with observe_cuts(on_open=_open(seen, "inner open")):
            stop_gradient(w, name="demo.a")
            with disable_blocks():
                stop_gradient(w, name="demo.a")
        with disable_blocks():
            stop_gradient(w, name="demo.a")
    assert seen == [("outer cut", "demo.a"), ("inner open", "demo.a"), ("outer open", "demo.a")]


def test_blocks_are_plain_again_after_the_with_even_after_an_error():
    seen: list = []
    with pytest.raises(RuntimeError, match="inside"):
        with observe_cuts(on_cut=_cut(seen), on_open=_open(seen)):
            raise RuntimeError("inside")
    w = torch.tensor(2.0, requires_grad=True)
    y = stop_gradient(w, name="demo.a")
    with disable_blocks():
        z = stop_gradient(w, name="demo.a")
    assert seen == [] and not y.requires_grad and z is w


def test_hooks_are_local_to_the_thread():
    seen: list = []
    other: list = []

    def run() -> None:
        y = stop_gradient(torch.ones(1, requires_grad=True), name="demo.thread")
        other.append(y.requires_grad)

    with observe_cuts(on_cut=_cut(seen)):
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    assert seen == [] and other == [False]


@pytest.mark.parametrize("arg", ["on_cut", "on_open"])
def test_a_hook_that_is_not_callable_is_a_type_error(arg: str):
    with pytest.raises(TypeError, match=f"observe_cuts: {arg} must be callable as "
                                        f"{arg}\\(x, name\\) or None, got int"):
        with observe_cuts(**{arg: 3}):
            pass


def test_hooks_are_never_consulted_under_torch_compile():
    seen: list = []

    def loss(x):
        return (x * stop_gradient(x * x, name="compiled.observed")).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="eager")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with observe_cuts(on_cut=_cut(seen), on_open=_open(seen)):
        (g,) = torch.autograd.grad(compiled(x), x)
    assert seen == []
    torch.testing.assert_close(g, x * x)  # the plain cut: d/dx of x * const
