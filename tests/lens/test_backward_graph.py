"""The lens mode (trace_cuts) and the backward graph as data (gradient_graph, named_tensors)."""

from __future__ import annotations

import copy
import doctest
import json

import pytest
import torch
from torch import nn

import toolkit.lens.backward_graph as backward_graph_module
from toolkit import as_constant, disable_blocks, stop_gradient
from toolkit.lens import GradientGraph, gradient_graph, trace_cuts
from toolkit.lens.backward_graph import is_cut_marker, named_tensors, node_label


def test_doctests():
    result = doctest.testmod(backward_graph_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def _dqn(shared: bool = False):
    torch.manual_seed(0)
    online = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)).double()
    target = online if shared else copy.deepcopy(online)
    s, s2 = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    r, a = torch.randn(6, dtype=torch.float64), torch.randint(0, 2, (6,))

    def loss_fn(cut: str = "as_constant"):
        q = online(s).gather(1, a[:, None]).squeeze(1)
        if cut == "as_constant":
            nxt = as_constant(lambda: target(s2).max(1).values, name="test.target")
        elif cut == "stop_gradient":
            nxt = stop_gradient(target(s2).max(1).values, name="test.target")
        else:
            nxt = target(s2).max(1).values.detach()
        return ((q - r - 0.9 * nxt) ** 2).mean()

    return online, target, loss_fn


# --- trace_cuts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["as_constant", "stop_gradient"])
def test_marked_cut_gives_the_same_values_and_gradients_as_detach(cut):
    online, target, loss_fn = _dqn()
    params = [*online.parameters(), *target.parameters()]
    plain = loss_fn("detach")
    g_plain = torch.autograd.grad(plain, params, allow_unused=True)
    with trace_cuts() as trace:
        traced = loss_fn(cut)
    g_traced = torch.autograd.grad(traced, params, allow_unused=True)
    assert torch.equal(plain, traced)
    for a, b in zip(g_plain, g_traced):
        assert (a is None and b is None) or torch.equal(a, b)
    assert all(g is None for g in g_traced[4:])  # the target network: no gradient at all
    assert trace.blocks == ["test.target"] and trace.n_marked == 1
    assert _has_marker(traced) and not _has_marker(plain)


def _has_marker(loss):
    stack, seen = [loss.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node  # kept alive: a freed node's id can be reused by another
        if is_cut_marker(node):
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


def test_marked_cut_shares_storage_and_blocks_backward_and_forward_mode():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    with trace_cuts():
        h = w * 3
        c = stop_gradient(h, name="test.c")
        assert c.requires_grad and c.data_ptr() == h.data_ptr()
        assert node_label(c.grad_fn) == "cut 'test.c'"
        (g,) = torch.autograd.grad((w * c).sum(), w)
        assert torch.equal(g, 3 * w.detach())  # d/dw (w · const) = const
        f = lambda x: (x * stop_gradient(x, name="test.c")).sum()  # noqa: E731
        assert torch.equal(torch.func.grad(f)(torch.tensor([1.0, 2.0])), torch.tensor([1.0, 2.0]))
        _, tangent = torch.func.jvp(lambda x: x * stop_gradient(x, name="test.c"),
                                    (torch.tensor([1.0, 2.0]),), (torch.ones(2),))
        assert torch.equal(tangent, torch.tensor([1.0, 2.0]))
    assert not stop_gradient(h, name="test.c").requires_grad  # the hook is gone


def test_nested_structures_unnamed_and_disabled_blocks():
    w = torch.ones(2, requires_grad=True)
    with trace_cuts() as trace:
        out = stop_gradient({"a": w * 2, "b": [w * 3, 7], "c": torch.ones(2)})
        with disable_blocks("test.*"):
            kept = stop_gradient(w * 4, name="test.off")
    assert is_cut_marker(out["a"].grad_fn) and is_cut_marker(out["b"][0].grad_fn)
    assert out["b"][1] == 7 and not out["c"].requires_grad
    assert node_label(out["a"].grad_fn) == "cut (unnamed stop_gradient)"
    assert kept.grad_fn.name() == "MulBackward0"  # a disabled block is not a cut
    assert trace.cuts == [None] and trace.blocks == [] and trace.n_marked == 2


# --- gradient_graph ------------------------------------------------------------------------------------


def test_graph_marks_the_cut_what_lies_behind_it_and_the_groups():
    online, target, loss_fn = _dqn()
    graph = gradient_graph(loss_fn, {"online": online, "target": target})
    assert graph.blocks == ["test.target"] and graph.groups == ["online", "target"]
    by_label = {n["label"]: n for n in graph.nodes}
    assert graph.nodes[0]["label"] == "Mean"
    cut = by_label["cut 'test.target'"]
    assert cut["kind"] == "cut" and cut["block"] == "test.target" and not cut["behind"]
    for name in ("online.0.weight", "online.2.bias"):
        assert by_label[name]["kind"] == "leaf" and not by_label[name]["behind"]
        assert by_label[name]["groups"] == ["online"]
    assert by_label["online.0.weight"]["shape"] == [8, 3]
    for name in ("target.0.weight", "target.2.bias"):
        assert by_label[name]["behind"] and by_label[name]["groups"] == ["target"]
    assert by_label["Max"]["behind"] and by_label["Max"]["groups"] == ["target"]
    assert by_label["Mean"]["groups"] == ["online"]  # no gradient crosses the cut
    kinds = {(graph.nodes[s]["label"], graph.nodes[d]["label"]): k for s, d, k in graph.edges}
    assert kinds[("cut 'test.target'", "Max")] == "cut"
    assert kinds[("Max", "Addmm")] == "behind"
    assert kinds[("Mean", "Pow")] == "flow"
    assert sum(n["behind"] for n in graph.nodes) == 10  # Max, Addmm, Tanh, Addmm, 2 T, 4 leaves


def test_shared_network_is_live_in_front_of_and_behind_the_cut():
    online, _, loss_fn = _dqn(shared=True)
    graph = gradient_graph(loss_fn, {"online": online})
    leaves = [n for n in graph.nodes if n["kind"] == "leaf"]
    assert len(leaves) == 4 and not any(n["behind"] for n in leaves)
    behind = {n["label"] for n in graph.nodes if n["behind"]}
    assert behind == {"Max", "Addmm", "Tanh", "T"}  # the call's own ops; the weights are shared


def test_graph_of_a_plain_loss_has_no_cut_and_round_trips_through_json():
    online, _, loss_fn = _dqn()
    graph = gradient_graph(loss_fn("stop_gradient"), {"online": online})
    assert graph.blocks == [] and not any(n["behind"] for n in graph.nodes)
    assert not any(n["kind"] == "cut" for n in graph.nodes)
    again = GradientGraph.from_dict(json.loads(json.dumps(graph.to_dict())))
    assert again == graph
    with pytest.raises(ValueError, match=r"GradientGraph.from_dict: expected a dict with nodes"):
        GradientGraph.from_dict({"nodes": []})
    with pytest.raises(TypeError, match=r"gradient_graph: groups must be a dict name -> "
                       r"parameters .* got list"):
        gradient_graph(loss_fn(), [online])
    assert gradient_graph(torch.ones(2).sum()).nodes == []


# --- named_tensors -------------------------------------------------------------------------------------


def test_named_tensors_names_modules_dicts_lists_and_named_parameters():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    w = torch.ones(1)
    kw = {"where": "f"}
    assert list(named_tensors(net, **kw)) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert list(named_tensors(net, prefix="q", **kw))[:2] == ["q.0.weight", "q.0.bias"]
    assert list(named_tensors({"q": net[1], "w": w}, **kw)) == ["q.weight", "q.bias", "w"]
    assert list(named_tensors(net[1].named_parameters(), **kw)) == ["weight", "bias"]
    assert list(named_tensors([w, net[1]], **kw)) == ["params[0]", "params[1].weight",
                                                       "params[1].bias"]
    assert list(named_tensors(w, prefix="g", **kw)) == ["g"]
    with pytest.raises(TypeError, match=r"f: params must be a tensor, .* got str"):
        named_tensors("w", **kw)
    with pytest.raises(ValueError, match=r"f: groups 'g' is empty"):
        named_tensors({}, where="f", arg="groups", prefix="g")
