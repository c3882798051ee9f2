"""The audit never changes what it promises to keep (issue 53): a step that calls ``backward()``
and ``optimizer.step()`` itself, frozen parameters written by a kernel, a module's counters;
a ``GradScaler`` and learning-rate schedulers the step moves; and a clear answer for
``inference_mode`` and complex losses.

"Byte-identical" is checked with ``torch.equal`` on every tensor of the optimizer's
``state_dict()``, every ``.grad``, parameter and buffer, against copies taken before the audit.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step


def _same(a: Any, b: Any) -> bool:
    """Recursive equality of state dicts: tensors by bytes (shape, dtype and values)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _everything(modules: list[nn.Module], optimizers: list[torch.optim.Optimizer]) -> dict:
    """Copies of every optimizer's state_dict, every parameter, buffer and ``.grad``."""
    return {
        "optimizers": [copy.deepcopy(o.state_dict()) for o in optimizers],
        "tensors": [t.detach().clone() for m in modules for t in [*m.parameters(), *m.buffers()]],
        "grads": [None if p.grad is None else p.grad.clone() for m in modules
                  for p in m.parameters()],
    }


class _DeepQNetwork(nn.Module):
    """philtabor/Deep-Q-Learning-Paper-To-Code, DQN/deep_q_network.py@master: the network
    holds its optimizer and its loss; the agent's ``learn()`` zeroes the gradients, computes
    the TD loss, calls ``backward()`` and ``optimizer.step()`` itself (here with Adam, whose
    step count and moments show any second update)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 16), nn.Linear(16, 3)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
        self.loss = nn.MSELoss()

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(state)))


def _dqn_agent(seed: int, *, target_grad: bool):
    torch.manual_seed(seed)
    q_eval, q_next = _DeepQNetwork(), _DeepQNetwork()
    s, s2, r = torch.randn(8, 4), torch.randn(8, 4), torch.randn(8)
    a, idx = torch.randint(0, 3, (8,)), torch.arange(8)

    def loss_of() -> torch.Tensor:
        q_pred = q_eval(s)[idx, a]
        q_nx = q_next(s2).max(dim=1)[0]
        q_target = r + 0.99 * (q_nx if target_grad else q_nx.detach())
        return q_eval.loss(q_target, q_pred)

    def learn() -> torch.Tensor:
        q_eval.optimizer.zero_grad()
        loss = loss_of()
        loss.backward()
        q_eval.optimizer.step()
        return loss

    # a few real steps first: Adam has a step count, moments, and .grad is set
    for _ in range(2):
        learn()
    return q_eval, q_next, learn, loss_of


@pytest.mark.parametrize("target_grad", [False, True])
def test_a_step_that_calls_backward_and_adam_step_itself_changes_nothing(
        target_grad: bool, seed: int) -> None:
    q_eval, q_next, learn, loss_of = _dqn_agent(seed, target_grad=target_grad)
    before = _everything([q_eval, q_next], [q_eval.optimizer])
    audit = audit_step(learn, q_eval.optimizer)
    after = _everything([q_eval, q_next], [q_eval.optimizer])
    assert _same(before, after)
    assert int(q_eval.optimizer.state_dict()["state"][0]["step"]) == 2
    # the update is named as what it is, and is no write of the step's own
    assert any("calls Adam.step() itself" in n for n in audit.notes), audit.notes
    assert not any("constraint" in n or "addcdiv" in n for n in audit.notes), audit.notes
    # the findings are those of the same step without its backward and update
    plain = audit_step(loss_of, q_eval.optimizer)
    assert sorted(x.parameter for x in audit.leaks) == sorted(x.parameter for x in plain.leaks)
    assert audit.ok == plain.ok == (not target_grad)


def test_a_grad_scaler_and_schedulers_the_step_moves_come_back_as_they_were(seed: int) -> None:
    # a mixed-precision step as torch's AMP recipe writes it (scaler.scale(loss).backward(),
    # scaler.step, scaler.update), then a one-cycle schedule and a plateau schedule: two calls
    # would move the scaler's growth tracker by 2, the schedules' epochs and the learning rate
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=3)
    cycle = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=50)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def train_step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        cycle.step()
        plateau.step(1.0)  # never better: each call is a bad epoch
        return loss

    for _ in range(2):
        train_step()
    states = copy.deepcopy((scaler.state_dict(), cycle.state_dict(), plateau.state_dict()))
    before = _everything([model], [opt])
    lr = opt.param_groups[0]["lr"]
    audit = audit_step(train_step, opt)
    assert audit.ok, str(audit)
    assert _same(before, _everything([model], [opt]))
    assert opt.param_groups[0]["lr"] == lr
    assert _same(states, (scaler.state_dict(), cycle.state_dict(), plateau.state_dict()))


def test_an_inner_optimizer_built_in_each_call_is_one_note_at_its_line(seed: int) -> None:
    # a first-order inner loop on a copy (the audit runs the step twice: two SGD objects step
    # from the same line); the model and the meta-optimizer come back as they were
    torch.manual_seed(seed)
    model = nn.Linear(3, 1)
    meta = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 3), torch.randn(8, 1)

    def step() -> torch.Tensor:
        fast = copy.deepcopy(model)
        inner = torch.optim.SGD(fast.parameters(), lr=0.1)
        F.mse_loss(fast(x), y).backward()
        inner.step()
        return F.mse_loss(fast(x), y)

    before = _everything([model], [meta])
    audit = audit_step(step, meta)
    assert _same(before, _everything([model], [meta]))
    calls = [n for n in audit.notes if "calls SGD.step() itself" in n]
    assert len(calls) == 1 and "test_audit_keeps_state.py:" in calls[0], audit.notes
    assert {d.kind for d in audit.dead} == {"copy"}, str(audit)


def test_gradients_cleared_to_none_by_the_step_come_back_as_the_same_objects(seed: int) -> None:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(5, 3)
    model(x).pow(2).mean().backward()
    opt.step()
    grads = [p.grad for p in model.parameters()]
    values = [g.clone() for g in grads]
    before = _everything([model], [opt])

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    assert audit_step(step, opt).ok
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))
    assert all(torch.equal(p.grad, v) for p, v in zip(model.parameters(), values))
    assert _same(before, _everything([model], [opt]))


def test_with_restore_state_false_the_note_says_the_optimizer_stepped_twice(seed: int) -> None:
    q_eval, _, learn, _ = _dqn_agent(seed, target_grad=False)
    audit = audit_step(learn, q_eval.optimizer, restore_state=False)
    assert int(q_eval.optimizer.state_dict()["state"][0]["step"]) == 4
    assert any("stepped it twice" in n for n in audit.notes), audit.notes


class _MetaBatchNorm(nn.Module):
    """learnables/learn2learn, learn2learn/nn/metabatchnorm.py@master (MAML++'s per-step batch
    norm, after AntreasAntoniou/HowToTrainYourMAMLPytorch): the running statistics are frozen
    ``nn.Parameter``\\ s, one row per inner step, that ``F.batch_norm``'s kernel writes in place;
    a plain counter picks the row."""

    def __init__(self, n_features: int, steps: int) -> None:
        super().__init__()
        self.running_mean = nn.Parameter(torch.zeros(steps, n_features), requires_grad=False)
        self.running_var = nn.Parameter(torch.ones(steps, n_features), requires_grad=False)
        self.weight = nn.Parameter(torch.ones(steps, n_features))
        self.bias = nn.Parameter(torch.zeros(steps, n_features))
        self._current_step = 0
        self._steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        step = self._current_step
        out = F.batch_norm(x, self.running_mean[step], self.running_var[step],
                           self.weight[step], self.bias[step], training=True, momentum=0.1)
        self._current_step = step + 1 if step < self._steps - 1 else 0
        return out


def test_frozen_statistics_written_by_the_batch_norm_kernel_and_a_counter_are_put_back(
        seed: int) -> None:
    torch.manual_seed(seed)
    body, norm, head = nn.Linear(3, 4), _MetaBatchNorm(4, steps=3), nn.Linear(4, 1)
    opt = torch.optim.Adam([*body.parameters(), *norm.parameters(), *head.parameters()])
    x = torch.randn(6, 3)
    before = _everything([body, norm, head], [opt])

    def step() -> torch.Tensor:
        return head(F.relu(norm(body(x)))).pow(2).mean()

    audit = audit_step(step, opt)
    assert _same(before, _everything([body, norm, head], [opt]))
    assert norm._current_step == 0
    # the oracle: the kernel does write them (two real forwards move rows 0 and 1)
    step(), step()
    assert not torch.equal(norm.running_mean[:2], before["tensors"][2][:2])
    assert not any("could not restore" in n for n in audit.notes), audit.notes


def _td_step(seed: int):
    torch.manual_seed(seed)
    q, q_target = nn.Linear(3, 2), nn.Linear(3, 2)
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    s, s2 = torch.randn(4, 3), torch.randn(4, 3)
    return opt, lambda: (q(s).max(1).values - 0.9 * q_target(s2).max(1).values).pow(2).mean()


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad"])
def test_an_audit_called_with_gradients_off_runs_the_step_as_training_does(
        mode: str, seed: int) -> None:
    opt, step = _td_step(seed)
    outside = audit_step(step, opt)
    with torch.inference_mode() if mode == "inference_mode" else torch.no_grad():
        inside = audit_step(step, opt)
        assert not torch.is_grad_enabled()  # the caller's mode is kept
    assert sorted(x.parameter for x in inside.leaks) == sorted(x.parameter for x in outside.leaks)
    assert sorted(x.parameter for x in inside.leaks) == ["q_target.bias", "q_target.weight"]
    assert any(f"called inside torch.{mode}()" in n for n in inside.notes), inside.notes


def test_a_tensor_made_in_inference_mode_is_an_error_that_says_so(seed: int) -> None:
    torch.manual_seed(seed)
    model = nn.Linear(3, 1)
    with torch.inference_mode():
        x = torch.randn(4, 3) * 2.0  # an inference tensor: autograd cannot save it
    weight = nn.Parameter(torch.ones(4))
    opt = torch.optim.SGD([*model.parameters(), weight], lr=0.1)
    with pytest.raises(RuntimeError) as real:  # the oracle: training fails the same way
        (model(x).squeeze(1) * weight).pow(2).sum().backward()
    with pytest.raises(RuntimeError, match=r"audit_step: the step reads a tensor made inside "
                                           r"torch.inference_mode\(\)"):
        audit_step(lambda: (model(x).squeeze(1) * weight).pow(2).sum(), opt)
    assert "Inference tensors" in str(real.value)


def test_a_complex_loss_is_an_error_as_it_is_for_backward(seed: int) -> None:
    torch.manual_seed(seed)
    w = nn.Parameter(torch.randn(3, dtype=torch.cfloat))
    opt = torch.optim.SGD([w], lr=0.1)
    with pytest.raises(RuntimeError, match="real scalar"):  # the oracle
        (w * 2).sum().backward()
    with pytest.raises(ValueError, match=r"audit_step: loss 'loss' is complex \(torch.complex64\)"
                                         r".*loss.abs\(\)"):
        audit_step(lambda: (w * 2).sum(), opt)
    assert audit_step(lambda: (w * 2).sum().abs(), opt).ok  # the fix the message names


def _threaded_rnn(seed: int, *, in_thread: bool, carry: bool):
    """A recurrent step whose forward runs in a thread it starts (the pattern of
    ``nn.parallel.parallel_apply``, one worker per replica), with its hidden state cut between
    calls or carried."""
    torch.manual_seed(seed)
    cell = nn.RNNCell(3, 4)
    head = nn.Linear(4, 1)
    opt = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
    x, y = torch.randn(5, 3), torch.randn(5, 1)
    state = {"h": torch.zeros(5, 4)}

    def forward() -> None:
        h = cell(x, state["h"])
        state["h"] = h if carry else h.detach()
        state["out"] = head(h)

    def step() -> torch.Tensor:
        if in_thread:
            worker = threading.Thread(target=forward)
            worker.start()
            worker.join()
        else:
            forward()
        return F.mse_loss(state["out"], y)

    return step, opt


@pytest.mark.parametrize("carry", [False, True])
def test_a_forward_in_another_thread_is_named_and_never_a_false_carried_graph(
        carry: bool, seed: int) -> None:
    # issue 53: autograd numbers the nodes of each thread apart; a forward run in a thread the
    # step starts used to be read as a graph made before the call (a false CARRIED)
    step, opt = _threaded_rnn(seed, in_thread=True, carry=False)
    for _ in range(2):  # the oracle: training runs, the state is cut
        opt.zero_grad()
        step().backward()
    audit = audit_step(*_threaded_rnn(seed, in_thread=True, carry=carry))
    assert not audit.carried and audit.threads, str(audit)
    assert "carried graphs not checked (other threads)" in str(audit).splitlines()[0] \
        or not audit.ok
    (note,) = [n for n in audit.notes if "other threads" in n]
    assert "started at test_audit_keeps_state.py:" in note
    assert "run the forward in the calling thread" in note
    assert audit.to_dict()["threads"] == list(audit.threads)
    # the advice followed: the same forward in the calling thread is audited whole, and a
    # state carried into the next call is found, as real backward finds it
    followed = audit_step(*_threaded_rnn(seed, in_thread=False, carry=carry))
    assert not followed.threads and not any("other threads" in n for n in followed.notes)
    assert bool(followed.carried) == carry, str(followed)
    step, opt = _threaded_rnn(seed, in_thread=False, carry=carry)
    step().backward()
    if carry:
        with pytest.raises(RuntimeError, match="second time"):
            step().backward()
    else:
        step().backward()
        assert str(followed).startswith("audit_step: clean") and "no carried graph" in str(
            followed)


def test_a_scheduler_the_step_builds_is_neither_saved_nor_said_restored(seed: int) -> None:
    # a scheduler made in each call (its __init__ steps it once) belongs to that call; one
    # whose state_dict() fails there is no error of the audit's
    torch.manual_seed(seed)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)

    class Warm(torch.optim.lr_scheduler.LambdaLR):
        def __init__(self, optimizer: torch.optim.Optimizer) -> None:
            super().__init__(optimizer, lambda epoch: 1.0)
            self.n = 0

        def state_dict(self) -> dict:
            return {**super().state_dict(), "n": self.n}

    def step() -> torch.Tensor:
        Warm(opt).step()
        torch.optim.lr_scheduler.StepLR(opt, 10).step()
        return model(x).pow(2).mean()

    audit = audit_step(step, opt)
    assert audit.ok and not any("StepLR" in n or "Warm" in n for n in audit.notes), audit.notes
