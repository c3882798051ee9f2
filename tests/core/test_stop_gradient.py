"""The primitive: forward identity, no gradient in any mode, nested structures, named switching."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import threading
from typing import NamedTuple

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit import (
    disable_blocks,
    is_block_disabled,
    record_blocks,
    reset_seen_blocks,
    seen_blocks,
    stop_gradient,
)

sg = stop_gradient
#: the module (``toolkit.stop_gradient`` is the function of the same name)
stop_gradient_module = importlib.import_module("toolkit.core.stop_gradient")


def grad(f, x):
    return torch.func.grad(f)(x)


# --- the contract -------------------------------------------------------------------------------


def test_jax_doc_case_six_without_zero_with():
    f = lambda x: x**2  # noqa: E731
    x = torch.tensor(3.0)
    assert grad(f, x).item() == 6.0
    assert grad(lambda x: f(sg(x)), x).item() == 0.0


def test_forward_is_identity_and_shares_storage():
    x = torch.randn(4, requires_grad=True)
    y = sg(x)
    assert torch.equal(y, x)
    assert not y.requires_grad
    assert y.data_ptr() == x.data_ptr()
    with torch.no_grad():
        y[0] = 42.0  # in-place edits are visible on both sides (documented)
    assert x[0].item() == 42.0


def test_reverse_mode_backward_and_autograd_grad():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x * sg(x)).sum().backward()
    assert torch.equal(x.grad, torch.tensor([1.0, 2.0]))  # d/dx x*c = c


def test_second_order_grad_of_grad():
    # f(x) = x^2 * sg(x^2): f' = 2x * x0^2 treated as constant → f'' = 2 x0^2
    x = torch.tensor(1.5, requires_grad=True)
    y = x**2 * sg(x**2)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert torch.allclose(g, 2 * x * x.detach() ** 2)
    (h,) = torch.autograd.grad(g, x)
    assert torch.allclose(h, torch.tensor(2 * 1.5**2))


def test_hessian_sees_block():
    def f(x):
        return (x * sg(x)).sum() + (sg(x) ** 3).sum()

    x = torch.tensor([1.0, -2.0, 0.5])
    hess = torch.func.hessian(f)(x)
    assert torch.equal(hess, torch.zeros(3, 3))  # first derivative sg(x) is constant
    hess_free = torch.func.hessian(lambda x: (x * x).sum())(x)
    assert torch.equal(hess_free, 2 * torch.eye(3))


def test_forward_mode_jvp_issue_case():
    # jvp of x*sg(x) + sg(x*x) at 3 with tangent 1 is sg(x) = 3
    f = lambda x: x * sg(x) + sg(x * x)  # noqa: E731
    out, tangent = torch.func.jvp(f, (torch.tensor(3.0),), (torch.tensor(1.0),))
    assert out.item() == 18.0
    assert tangent.item() == 3.0


def test_forward_mode_forward_ad():
    x = torch.tensor(3.0)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.tensor(1.0))
        out = dual * sg(dual) + sg(dual * dual)
        assert fwAD.unpack_dual(out).tangent.item() == 3.0
        assert fwAD.unpack_dual(sg(dual)).tangent is None


def test_jacfwd_and_jacrev_agree():
    def f(x):
        return x * sg(x).sum()

    x = torch.tensor([1.0, 2.0, 3.0])
    expected = torch.eye(3) * 6.0
    assert torch.equal(torch.func.jacrev(f)(x), expected)
    assert torch.equal(torch.func.jacfwd(f)(x), expected)


def test_vmap_of_grad():
    def f(x):
        return (x * sg(x)).sum()

    xs = torch.randn(5, 3)
    per_example = torch.func.vmap(torch.func.grad(f))(xs)
    assert torch.equal(per_example, xs)


def test_named_block_inside_func_transforms_can_be_disabled():
    def f(x):
        return (x * sg(x, name="t.a")).sum()

    x = torch.tensor([1.0, 2.0])
    with disable_blocks("t.*"):
        assert torch.equal(torch.func.grad(f)(x), 2 * x)
        assert torch.equal(torch.func.vmap(torch.func.grad(f))(x[None]), 2 * x[None])
    assert torch.equal(torch.func.grad(f)(x), x)


@pytest.mark.slow
def test_torch_compile_fullgraph_blocks_and_switches():
    torch._dynamo.reset()

    def loss(x):
        return (x * sg(x * x, name="compiled.block")).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="eager")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (g,) = torch.autograd.grad(compiled(x), x)
    assert torch.allclose(g, x.detach() ** 2)
    with disable_blocks("compiled.*"):
        (g,) = torch.autograd.grad(compiled(x), x)
    assert torch.allclose(g, 3 * x.detach() ** 2)
    (g,) = torch.autograd.grad(compiled(x), x)
    assert torch.allclose(g, x.detach() ** 2)
    # no graph breaks: fullgraph=True would have raised; explain() confirms a single graph
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(loss)(x)
    assert explanation.graph_break_count == 0


@pytest.mark.slow
def test_torch_compile_inductor_backend():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: (x * sg(x)).sum(), fullgraph=True)
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (g,) = torch.autograd.grad(compiled(x), x)
    assert torch.allclose(g, x.detach())


# --- nested structures --------------------------------------------------------------------------


class Pair(NamedTuple):
    a: torch.Tensor
    b: object


@dataclasses.dataclass
class State:
    w: torch.Tensor
    tag: str
    nested: dict


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: torch.Tensor
    n: int = 3


def _all_tensors_blocked(tree) -> bool:
    leaves = []

    def visit(v):
        if isinstance(v, torch.Tensor):
            leaves.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                visit(item)
        elif isinstance(v, (list, tuple)):
            for item in v:
                visit(item)
        elif dataclasses.is_dataclass(v):
            for f in dataclasses.fields(v):
                visit(getattr(v, f.name))

    visit(tree)
    return bool(leaves) and all(not t.requires_grad for t in leaves)


def test_nested_structures_keep_types_and_non_tensor_leaves():
    x = torch.ones(2, requires_grad=True)
    tree = {
        "list": [x, 1, "s"],
        "tuple": (x, None),
        "pair": Pair(x, 2.5),
        "ordered": collections.OrderedDict(z=x, a=3),
        "state": State(x, "tag", {"inner": [x]}),
        "frozen": Frozen(x),
    }
    out = sg(tree)
    assert type(out) is dict and list(out) == list(tree)
    assert out["list"][1:] == [1, "s"]
    assert type(out["tuple"]) is tuple and out["tuple"][1] is None
    assert type(out["pair"]) is Pair and out["pair"].b == 2.5
    assert type(out["ordered"]) is collections.OrderedDict and list(out["ordered"]) == ["z", "a"]
    assert type(out["state"]) is State and out["state"].tag == "tag"
    assert type(out["frozen"]) is Frozen and out["frozen"].n == 3
    assert _all_tensors_blocked(out)
    # inputs untouched
    assert tree["state"].w.requires_grad and tree["frozen"].w.requires_grad


def test_non_tensor_input_is_returned_unchanged():
    obj = object()
    assert sg(obj) is obj
    assert sg(3.0) == 3.0


def test_disabled_block_returns_the_very_same_object():
    tree = {"a": torch.ones(1, requires_grad=True)}
    with disable_blocks():
        assert sg(tree) is tree


@st.composite
def trees(draw, depth=0):
    leaf = st.one_of(
        st.integers(),
        st.text(max_size=3),
        st.none(),
        st.builds(lambda n: torch.randn(n, requires_grad=True), st.integers(1, 3)),
    )
    if depth >= 3:
        return draw(leaf)
    child = trees(depth=depth + 1)
    return draw(
        st.one_of(
            leaf,
            st.lists(child, max_size=3),
            st.lists(child, max_size=3).map(tuple),
            st.dictionaries(st.text(min_size=1, max_size=3), child, max_size=3),
        )
    )


@settings(max_examples=60, deadline=None)
@given(trees())
def test_round_trip_preserves_structure_and_values(tree):
    out = sg(tree)

    def same(a, b):
        assert type(a) is type(b)
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b) and not b.requires_grad and a.data_ptr() == b.data_ptr()
        elif isinstance(a, dict):
            assert list(a) == list(b)
            for k in a:
                same(a[k], b[k])
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b)
            for u, v in zip(a, b):
                same(u, v)
        else:
            assert a == b

    same(tree, out)


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [1, 2.0, b"em", ["em"]])
def test_non_string_name_is_a_type_error(bad):
    with pytest.raises(TypeError, match="stop_gradient: name must be a str"):
        sg(torch.ones(1), name=bad)


def test_empty_name_is_a_value_error():
    with pytest.raises(ValueError, match="stop_gradient: name must be a non-empty dotted string"):
        sg(torch.ones(1), name="")


@pytest.mark.parametrize("bad", ["em..r", ".em", "em.", "has space", "a*b"])
def test_malformed_name_is_a_value_error(bad):
    with pytest.raises(ValueError, match="dot-separated parts"):
        sg(torch.ones(1), name=bad)


def test_disable_blocks_rejects_bad_patterns():
    with pytest.raises(TypeError, match="disable_blocks: patterns must be str"):
        disable_blocks(3)
    with pytest.raises(ValueError, match="disable_blocks: a pattern must be a non-empty glob"):
        disable_blocks("")


def test_is_block_disabled_validates_name():
    with pytest.raises(TypeError, match="is_block_disabled: name must be a str"):
        is_block_disabled(5)


# --- disabling ----------------------------------------------------------------------------------


def _grad_through(name=None):
    x = torch.tensor(3.0, requires_grad=True)
    (g,) = torch.autograd.grad(x * sg(x, name=name), x)
    return g.item()  # 3.0 blocked, 6.0 unblocked


def test_disable_all_disables_named_and_unnamed():
    with disable_blocks():
        assert _grad_through("em.responsibilities") == 6.0
        assert _grad_through(None) == 6.0
    assert _grad_through("em.responsibilities") == 3.0
    assert _grad_through(None) == 3.0


def test_glob_disables_only_matching_names_and_never_unnamed():
    with disable_blocks("em.*"):
        assert _grad_through("em.responsibilities") == 6.0
        assert _grad_through("rbm.negative_samples") == 3.0
        assert _grad_through(None) == 3.0
    with disable_blocks("*"):
        assert _grad_through("softmax.max") == 6.0
        assert _grad_through(None) == 3.0  # only the no-pattern form reaches unnamed blocks


def test_patterns_are_case_sensitive_and_exact():
    with pytest.warns(UserWarning, match="'em' matches no known block"), disable_blocks("em"):
        assert _grad_through("em.responsibilities") == 3.0
    with pytest.warns(UserWarning, match="'EM.\\*' matches no known block"), \
            disable_blocks("EM.*"):
        assert _grad_through("em.responsibilities") == 3.0
    with disable_blocks("em.responsibilities", "rbm.*"):
        assert _grad_through("em.responsibilities") == 6.0
        assert _grad_through("rbm.negative_samples") == 6.0


@pytest.mark.filterwarnings("ignore:disable_blocks:UserWarning")  # no block runs inside
def test_nesting_is_a_union_and_unwinds():
    with disable_blocks("a.*"):
        assert is_block_disabled("a.x") and not is_block_disabled("b.x")
        with disable_blocks("b.*"):
            assert is_block_disabled("a.x") and is_block_disabled("b.x")
            with disable_blocks():
                assert is_block_disabled(None)
            assert not is_block_disabled(None)
        assert is_block_disabled("a.x") and not is_block_disabled("b.x")
    assert not is_block_disabled("a.x")


def test_state_restored_after_exception():
    with pytest.raises(RuntimeError), disable_blocks():
        raise RuntimeError("boom")
    assert not is_block_disabled(None)


def test_usable_as_decorator_and_reentrant():
    @disable_blocks("dec.*")
    def inner():
        return _grad_through("dec.block")

    @disable_blocks("dec.*")
    def outer():
        return inner(), is_block_disabled("dec.block")

    assert outer() == (6.0, True)
    assert _grad_through("dec.block") == 3.0


def test_threads_do_not_interfere():
    barrier = threading.Barrier(2)
    results: dict[str, tuple[float, float]] = {}
    errors: list[BaseException] = []

    def worker(label, patterns):
        try:
            with disable_blocks(*patterns):
                barrier.wait(timeout=10)  # both threads are inside their contexts now
                first = _grad_through("th.block")
                barrier.wait(timeout=10)
                results[label] = (first, _grad_through("th.block"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t1 = threading.Thread(target=worker, args=("off", ("th.*",)))
    _grad_through("other.block")  # known, so the thread's "other.*" does not warn
    t2 = threading.Thread(target=worker, args=("on", ("other.*",)))
    t1.start()
    t2.start()
    t1.join()
    t2.join()
    assert not errors
    assert results == {"off": (6.0, 6.0), "on": (3.0, 3.0)}
    assert _grad_through("th.block") == 3.0


def test_decorated_function_in_two_threads():
    @disable_blocks("dt.*")
    def work():
        barrier.wait(timeout=10)
        return _grad_through("dt.block")

    barrier = threading.Barrier(2)
    out: list[float] = []
    threads = [threading.Thread(target=lambda: out.append(work())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [6.0, 6.0]
    assert not is_block_disabled("dt.block")


# --- patterns that match no block -------------------------------------------------------------


def test_typo_of_an_algorithms_block_warns_with_did_you_mean():
    # simsiam is not imported: its BLOCK is known from the source of toolkit.algorithms
    with pytest.warns(UserWarning, match="did you mean 'simsiam.target'"):
        disable_blocks("simsiam.targt")


def test_typo_warns_once_before_the_code_runs():
    with pytest.warns(UserWarning, match="'em.responsibilites' matches no known block.*"
                      "did you mean 'em.responsibilities'") as caught:
        with disable_blocks("em.responsibilites"):
            assert len(caught) == 1
    assert len(caught) == 1  # not again when the with ends
    with pytest.warns(UserWarning, match="'td.targt'") as caught:
        @disable_blocks("td.targt")
        def step():
            return _grad_through("td.target")

    assert step() == 3.0 and step() == 3.0  # the typo switched nothing off
    assert len(caught) == 1  # warned when decorated, not on every call


def test_pattern_matching_nothing_lists_the_known_blocks(monkeypatch):
    # only the algorithms' blocks and this test's are known: a block another test ran in this
    # process ("X" sorts before "adversarial") would come first in the list
    monkeypatch.setattr(stop_gradient_module, "_EVER_SEEN", set())
    known = "known blocks: adversarial.examples, .*em.responsibilities, .*simsiam.target"
    with pytest.warns(UserWarning, match=f"'byl.\\*' matches no known block.*{known}"):
        with disable_blocks("byl.*"):
            _grad_through("simsiam.target")


def test_family_typo_suggests_the_family_glob():
    with pytest.warns(UserWarning, match="did you mean 'simsiam.\\*'"), disable_blocks("simsam.*"):
        pass


def test_strict_raises_naming_the_known_blocks():
    with pytest.raises(ValueError, match=r"disable_blocks: 'simsiam\.targt' matches no known "
                       r"block.*did you mean 'simsiam\.target'.*known blocks: "):
        with disable_blocks("simsiam.targt", strict=True):
            pass  # pragma: no cover - never entered
    with pytest.raises(ValueError, match=r"'nothing\.here' matches no known block"):
        disable_blocks("nothing.here", strict=True)(lambda: None)()
    with pytest.raises(TypeError, match="disable_blocks: strict must be a bool"):
        disable_blocks("em.*", strict="yes")


def test_a_block_of_ones_own_that_runs_inside_does_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with disable_blocks("mine_never_seen_before.*"):
            assert _grad_through("mine_never_seen_before.block") == 6.0
        with disable_blocks("mine_never_seen_before.block", strict=True):  # known once it ran
            assert _grad_through("mine_never_seen_before.block") == 6.0
        with disable_blocks("em.*", "*"), disable_blocks():
            pass


def test_no_warning_piles_on_an_exception():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="boom"), disable_blocks("zz_unknown.*"):
            raise RuntimeError("boom")


def test_known_blocks_hold_every_algorithms_block():
    import importlib

    from toolkit.core.stop_gradient import known_blocks

    modules = ["adversarial", "dice", "em", "rbm", "simsiam", "softmax", "td", "vq_vae"]
    blocks = {importlib.import_module(f"toolkit.algorithms.{m}").BLOCK for m in modules}
    assert blocks <= set(known_blocks())
    assert known_blocks() == tuple(sorted(known_blocks()))


# --- seen_blocks --------------------------------------------------------------------------------


def test_seen_blocks_records_named_blocks_in_order_once():
    reset_seen_blocks()
    x = torch.ones(1)
    sg(x, name="b.two")
    sg(x, name="a.one")
    sg(x, name="b.two")
    sg(x)  # unnamed blocks have no name to record
    with disable_blocks():
        sg(x, name="c.disabled")  # executed though disabled: still seen
    assert seen_blocks() == ("b.two", "a.one", "c.disabled")
    reset_seen_blocks()
    assert seen_blocks() == ()


def test_record_blocks_scopes_and_merges():
    reset_seen_blocks()
    sg(torch.ones(1), name="outer.a")
    with record_blocks() as names:
        sg(torch.ones(1), name="inner.b")
        assert seen_blocks() == ("inner.b",)
    assert names == ["inner.b"]
    assert seen_blocks() == ("outer.a", "inner.b")


def test_seen_blocks_are_thread_local():
    reset_seen_blocks()
    seen_in_thread: list[tuple[str, ...]] = []

    def worker():
        sg(torch.ones(1), name="thread.only")
        seen_in_thread.append(seen_blocks())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen_in_thread == [("thread.only",)]
    assert "thread.only" not in seen_blocks()
