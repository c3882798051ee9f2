"""Carried and kept graphs judged by provenance (issue 62, item 2), on steps none of the corpus
holds. The oracle is a real training loop: a graph that grows is one whose node count grows
from iteration to iteration, a graph that fails is a second ``backward()`` that raises; the
fix the audit names, made by hand, stops both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from toolkit import audit_step
from toolkit.audit.kinds import HeldKind


def _nodes(tensors: list[torch.Tensor]) -> int:
    """The nodes of the graph behind ``tensors`` (what a kept graph keeps alive)."""
    seen: set[int] = set()
    stack = [t.grad_fn for t in tensors if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(child for child, _ in node.next_functions)
    return len(seen)


def _replay(detach: bool, seed: int = 0):
    """An energy model trained on samples a generator makes, with a replay buffer kept in a
    plain list (Du & Mordatch 2019's buffer, published with the samples detached). The
    buffer is read from its oldest, detached entries only: the loss never reads what the
    previous call kept, yet every call's graph stays alive in the list."""
    torch.manual_seed(seed)
    gen, energy = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.Adam([*gen.parameters(), *energy.parameters()], lr=1e-3)
    buffer = [torch.rand(4) for _ in range(64)]

    def step() -> torch.Tensor:
        fake = gen(torch.randn(8, 4))
        replayed = torch.stack(buffer[:8])
        buffer.extend(fake.detach() if detach else fake)
        return energy(replayed).mean() - energy(fake).mean()

    return step, opt, buffer


@pytest.mark.parametrize("seed", [0, 1])
def test_a_graph_grown_through_a_plain_list_is_found_where_the_step_stores_it(seed: int) -> None:
    step, opt, buffer = _replay(False, seed)
    audit = audit_step(step, opt)
    (held,) = audit.held
    assert not audit.ok and not audit.carried
    assert held.module == "buffer" and held.kind is HeldKind.KEPT
    assert held.kept_in == "an item of a list kept in a closure variable"
    assert held.lines and held.lines[0].text == "buffer.extend(fake.detach() if detach else fake)"
    assert held.older > 0 and held.n_nodes > 0
    # the oracle: in a real loop, the nodes the list keeps alive grow with every iteration
    counts = []
    for _ in range(3):
        opt.zero_grad()
        step().backward()
        opt.step()
        counts.append(_nodes(buffer))
    assert counts[0] < counts[1] < counts[2]
    # the published fix: the same loop keeps no graph at all
    fixed, opt_fixed, kept = _replay(True, seed)
    assert audit_step(fixed, opt_fixed).ok
    for _ in range(3):
        opt_fixed.zero_grad()
        fixed().backward()
        opt_fixed.step()
    assert _nodes(kept) == 0


def test_a_history_of_losses_kept_with_their_graph_is_found_and_one_item_is_not() -> None:
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(5, 3)
    history: list[torch.Tensor] = []
    last: dict[str, torch.Tensor] = {}

    def step() -> torch.Tensor:
        loss = net(x).pow(2).mean()
        history.append(loss)  # loss.item() meant
        return loss

    (held,) = audit_step(step, opt).held
    assert (held.module, held.name) == ("history", "[1]")  # the second call's loss
    assert history == []  # the audit put the list back as it found it
    assert held.lines[0].text == "history.append(loss)  # loss.item() meant"

    def step_item() -> torch.Tensor:
        loss = net(x).pow(2).mean()
        history.append(loss.item())
        return loss

    def step_last() -> torch.Tensor:  # one step's graph, replaced by the next: no growth
        loss = net(x).pow(2).mean()
        last["loss"] = loss
        return loss

    history.clear()
    assert audit_step(step_item, opt).ok
    assert audit_step(step_last, opt).ok


@pytest.mark.parametrize("kept", ["global", "attribute"])
def test_a_copy_made_once_before_the_loop_is_not_carried(kept: str) -> None:
    # float64 data made to require grad, then cast: one ToCopy node before the loop, which
    # saves nothing; every iteration's backward passes it and none fails, nothing grows
    torch.manual_seed(0)
    X = torch.tensor(np.random.default_rng(0).random((6, 2)), requires_grad=True).float()
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    if kept == "attribute":  # kept by a module, as a physics-informed model keeps its points
        net.points = X

    def step() -> torch.Tensor:
        return net(net.points if kept == "attribute" else X).pow(2).mean()

    audit = audit_step(step, opt)
    assert audit.ok and not audit.carried and not audit.held, str(audit)
    before = _nodes([X])
    for _ in range(3):  # the oracle: a real loop runs, and the graph does not grow
        opt.zero_grad()
        step().backward()
        opt.step()
    assert _nodes([X]) == before


def test_a_tensor_made_before_the_loop_that_saved_tensors_is_carried() -> None:
    # the same data through exp() before the loop: ExpBackward saves its result, which the
    # first backward frees, so the second fails
    torch.manual_seed(0)
    X = torch.tensor(np.random.default_rng(0).random((6, 2)), requires_grad=True).exp().float()
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step() -> torch.Tensor:
        return net(X).pow(2).mean()

    (carried,) = audit_step(step, opt).carried
    assert carried.created == "before the audit"
    step().backward()
    with pytest.raises(RuntimeError, match="second time"):
        step().backward()


@pytest.mark.parametrize("where", ["dict", "closure", "object"])
def test_a_state_carried_in_a_dict_a_closure_or_an_object_is_carried(where: str) -> None:
    torch.manual_seed(0)
    cell = nn.RNNCell(4, 4)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)
    box: dict[str, torch.Tensor] = {"h": torch.zeros(2, 4)}
    keep = [torch.zeros(2, 4)]

    class State:
        h = torch.zeros(2, 4)

    state = State()

    def step() -> torch.Tensor:
        x = torch.randn(2, 4)
        if where == "dict":
            box["h"] = h = cell(x, box["h"])
        elif where == "closure":
            keep[0] = h = cell(x, keep[0])
        else:
            state.h = h = cell(x, state.h)
        return h.pow(2).mean()

    audit = audit_step(step, opt)
    (carried,) = audit.carried
    assert carried.created == "in the first call" and not audit.held
    # the oracle: the second real backward fails through the previous iteration's graph
    step().backward()
    with pytest.raises(RuntimeError, match="second time"):
        step().backward()


_STATEFUL = '''
import torch
from torch import nn


class Forecaster(nn.Module):
    """A stateful LSTM forecaster: the state is kept between batches (truncated BPTT)."""

    def __init__(self):
        super().__init__()
        self.lstm, self.head = nn.LSTM(3, 8, batch_first=True), nn.Linear(8, 1)
        self.hidden = None

    def forward(self, x):
        out, self.hidden = self.lstm(x, self.hidden)
        return self.head(out[:, -1])


def build(seed):
    torch.manual_seed(seed)
    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(4, 5, 3), torch.randn(4, 1)
    return (lambda: nn.functional.mse_loss(model(x), y)), opt, model
'''


def test_a_state_kept_as_a_tuple_is_cut_where_it_is_read_and_then_trains(tmp_path) -> None:
    # the (h, c) tuple the forward keeps: the printed edit cuts the tuple where the forward
    # reads it; applied, the step trains call after call and gives the gradients of the
    # published fix (the state detached before it is read: PyTorch's word_language_model,
    # repackage_hidden)
    from steps_on_disk import load

    from toolkit.audit.fixes.edits import apply_edits

    module = load(tmp_path / "stateful.py", _STATEFUL)
    step, opt, _ = module.build(0)
    audit = audit_step(step, opt)
    edits = list(dict.fromkeys(e for c in audit.carried for e in c.edits))
    assert len(audit.carried) == 2 and [e.new for e in edits] == [
        "None if self.hidden is None else tuple(t.detach() for t in self.hidden)"]
    edited = load(tmp_path / "stateful_edited.py",
                  apply_edits((tmp_path / "stateful.py").read_text("utf-8"), edits))
    fixed = load(tmp_path / "stateful_fixed.py", _STATEFUL.replace(
        "self.lstm(x, self.hidden)",
        "self.lstm(x, None if self.hidden is None else tuple(h.detach() for h in self.hidden))"))
    (step_e, opt_e, model_e), (step_f, opt_f, model_f) = edited.build(0), fixed.build(0)
    for _ in range(3):
        for s, o in ((step_e, opt_e), (step_f, opt_f)):
            o.zero_grad()
            s().backward()
        for p_e, p_f in zip(model_e.parameters(), model_f.parameters()):
            torch.testing.assert_close(p_e.grad, p_f.grad)
        opt_e.step()
        opt_f.step()
    assert audit_step(step_e, opt_e).ok


@pytest.mark.parametrize("kept", ["dict", "list"])
def test_a_state_kept_in_a_plain_container_is_cut_where_the_step_stores_it(kept: str) -> None:
    """A recurrent state handed to the next call in a dict (``memory.update(h=h)``), and a
    memory bank in a list that this call's loss reads too (``bank.append(f)``, as a
    cross-batch memory keeps features): each printed edit cuts the value where the step stores
    it, is run before it is printed, and trains as the state detached there; the audit puts
    the container back as it found it."""
    from toolkit.audit.verify.in_process import edited_step

    def build(fixed: bool):
        torch.manual_seed(0)
        cell = nn.GRUCell(3, 4)
        opt = torch.optim.SGD(cell.parameters(), lr=0.1)
        xs, at = torch.randn(5, 2, 3), {"call": 0}  # the position: put back too
        memory = {"h": torch.zeros(2, 4)}
        bank: list[torch.Tensor] = []

        def step() -> torch.Tensor:
            x = xs[at["call"]]
            at["call"] += 1
            if kept == "dict":
                h = cell(x, memory["h"])
                memory.update(h=h.detach() if fixed else h)
                return h.pow(2).mean()
            f = cell(x)
            bank.append(f.detach() if fixed else f)
            del bank[:-2]
            return (f @ torch.cat(bank).T).pow(2).mean()

        return step, opt, cell, memory, bank

    step, opt, cell, memory, bank = build(False)
    audit = audit_step(step, opt)
    assert audit.carried and memory["h"].eq(0).all() and bank == []
    edits = list(dict.fromkeys(e for c in audit.carried for e in c.edits))
    stored = "memory.update(h=" if kept == "dict" else "bank.append("
    # ``x.detach() if fixed else x``: the branch not cut yet is cut
    assert edits and all(e.new == "{} if fixed else {}.detach()".format(
        *e.old.split(" if fixed else ")) for e in edits), str(audit)
    assert all(stored in line.text for c in audit.carried for line in c.lines)
    edited = edited_step(step, edits)
    assert edited is not None
    fixed, _, cell_f, _, _ = build(True)
    for _ in range(3):  # the bug's second backward fails; the edited step trains as the fix
        grads = torch.autograd.grad(edited(), list(cell.parameters()))
        want = torch.autograd.grad(fixed(), list(cell_f.parameters()))
        for g, w in zip(grads, want):
            torch.testing.assert_close(g, w)


def test_a_value_cut_and_written_into_a_kept_tensor_is_not_carried() -> None:
    """A replay buffer kept as one tensor, written in place with samples cut by
    ``stop_gradient`` (JEM's buffer, Grathwohl et al. 2020): in a plain run no graph is
    made there, and the audit, which records each cut as a node, finds none either."""
    from toolkit import stop_gradient

    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    buffer = torch.rand(6, 4)

    def step() -> torch.Tensor:
        index = torch.randint(0, 6, (3,))
        x = buffer[index] + 0.1 * net.weight
        buffer[index] = stop_gradient(x)
        return net(x).pow(2).mean()

    assert audit_step(step, opt).ok
