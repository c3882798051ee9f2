"""The step audit's stages on a running script (toolkit.audit.script.staged): each audited
``backward()`` of a plain script becomes a recorded step judged by the step audit's truth, rules
and fixes; what the watch reports itself stays the watch's; the recording leaves torch as it
found it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from toolkit.audit.kinds import Kind
from toolkit.audit.script.runner import run_script
from toolkit.audit.script.session import Watch
from toolkit.audit.verify.rerun import verify

# a DQN step with its target network read with gradients on: the loss's gradient reaches
# q_target, which no optimizer steps (written after the DQN update of Mnih et al., 2015)
TARGET_NETWORK = """
import copy
import torch
from torch import nn

q = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
q_target = copy.deepcopy(q)
opt = torch.optim.Adam(q.parameters(), lr=1e-3)
for it in range(4):
    s, s2 = torch.randn(8, 4), torch.randn(8, 4)
    a = torch.randint(0, 2, (8,))
    r = torch.randn(8)
    q_sa = q(s).gather(1, a[:, None]).squeeze(1)
    target = r + 0.9 * q_target(s2).max(1).values
    loss = (q_sa - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


# truncated backpropagation through time without its cut: the LSTM's state (h, c) is passed
# on with its graph (written after the word language model of pytorch/examples, whose
# repackage_hidden cuts it)
CARRIED_STATE = """
import torch
from torch import nn

torch.manual_seed(0)
lstm = nn.LSTM(3, 5, batch_first=True)
head = nn.Linear(5, 1)
opt = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.1)
hidden = (torch.zeros(1, 2, 5), torch.zeros(1, 2, 5))
for it in range(4):
    x, y = torch.randn(2, 6, 3), torch.randn(2, 6, 1)
    out, hidden = lstm(x, hidden)
    loss = (head(out) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
"""


# a normaliser whose running mean is assigned from the batch with its graph: every iteration's
# graph stays reachable from the buffer (written after the running statistics of batch
# normalisation, Ioffe and Szegedy 2015, which torch updates without a graph)
HELD_STATE = """
import torch
from torch import nn

torch.manual_seed(0)


class Whiten(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n))

    def forward(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x.mean(0)
        return x - self.mean.detach()


net = nn.Sequential(nn.Linear(3, 4), Whiten(4), nn.Linear(4, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for it in range(4):
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    loss = (net(x) - y).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _watched(path: Path, fails: bool = False) -> Watch:
    """The script run under a watch; ``fails``: it stops with its own error, as it does
    without the watch (a backward through a graph an optimizer step has changed)."""
    watch = Watch(record=True)
    outcome = run_script(str(path), [], watch)
    assert (outcome.error is not None) == fails, "".join(outcome.traceback)
    return watch


def test_each_audited_backward_is_judged_by_the_step_audits_rules(tmp_path: Path) -> None:
    watch = _watched(_script(tmp_path, HELD_STATE))
    # two audited iterations, one backward each: two recorded steps, each with the held graph
    assert [it for it, *_ in watch.staged.audits] == [0, 1]
    for *_, audit in watch.staged.audits:
        assert [(h.module, h.name) for h in audit.held] == [("net.1", "mean")]


def test_a_target_networks_gradient_stays_the_watchs_wasted_work(tmp_path: Path) -> None:
    # the leaks rule of audit_step would call it a leak; the script mode judges a tensor no
    # optimizer steps by its role: below every trained tensor, on the target's side, it is
    # work done in vain (information)
    watch = _watched(_script(tmp_path, TARGET_NETWORK))
    assert watch.staged.audits == []
    kinds = {f.kind for f in watch.findings.values()}
    assert Kind.WASTED in kinds and not any(f.failure for f in watch.findings.values())


def test_a_state_carried_between_iterations_is_cut_in_plain_torch_as_it_was_held(
        tmp_path: Path) -> None:
    watch = _watched(_script(tmp_path, CARRIED_STATE), fails=True)
    (carried,) = [f for f in watch.findings.values() if f.failure]
    assert carried.kind is Kind.CARRIED and carried.iteration == 1
    assert carried.at == ("train.py:12: out, hidden = lstm(x, hidden)",)
    # a tuple (h, c), cut item by item as the script held it
    assert [str(e) for e in carried.edits] == [
        "train.py:12: hidden -> tuple(t.detach() for t in hidden)"]
    assert "toolkit" not in carried.edits[0].new


@pytest.mark.slow
def test_its_edit_is_verified_by_rerunning_the_script(tmp_path: Path) -> None:
    path = _script(tmp_path, CARRIED_STATE)
    watch = _watched(path, fails=True)
    (carried,) = [f for f in watch.findings.values() if f.failure]
    ok, why = verify(carried, [], str(path), [], watch.grads, 2, str(tmp_path))
    assert ok, why


def test_the_recording_leaves_torch_as_it_found_it(tmp_path: Path) -> None:
    hooks = (torch.nn.modules.module._global_forward_hooks,
             torch.nn.modules.module._global_forward_pre_hooks)
    before = [len(h) for h in hooks]
    setattr_before = torch.nn.Module.__setattr__
    _watched(_script(tmp_path, TARGET_NETWORK))
    assert torch._C._len_torch_function_stack() == 0
    assert [len(h) for h in hooks] == before
    assert torch.nn.Module.__setattr__ is setattr_before


def test_a_watch_every_n_iterations_records_only_those(tmp_path: Path) -> None:
    watch = Watch(steps=2, every=2)
    run_script(str(_script(tmp_path, HELD_STATE)), [], watch)
    assert [it for it, *_ in watch.staged.audits] == [0, 2]
    assert torch._C._len_torch_function_stack() == 0


def test_a_graph_held_by_a_modules_buffer_is_cut_where_it_is_assigned(tmp_path: Path) -> None:
    watch = _watched(_script(tmp_path, HELD_STATE))
    (held,) = [f for f in watch.findings.values() if f.failure]
    assert held.kind is Kind.HELD and held.iteration == 0
    assert held.at == ("train.py:14: self.mean = 0.9 * self.mean + 0.1 * x.mean(0)",)
    assert [str(e) for e in held.edits] == [
        "train.py:14: 0.9 * self.mean + 0.1 * x.mean(0) -> "
        "(0.9 * self.mean + 0.1 * x.mean(0)).detach()"]


@pytest.mark.slow
def test_the_held_graphs_edit_is_verified_and_the_script_trains_the_same(tmp_path: Path) -> None:
    path = _script(tmp_path, HELD_STATE)
    watch = _watched(path)
    (held,) = [f for f in watch.findings.values() if f.failure]
    ok, why = verify(held, [], str(path), [], watch.grads, 2, str(tmp_path))
    assert ok, why
