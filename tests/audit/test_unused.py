"""``explain_unused_parameters`` in one process (``tests/integrations/test_ddp.py`` checks it
against a real two-process DDP): each reason, its line, frozen and ignored parameters, the
report and the errors."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from toolkit import explain_unused_parameters, stop_gradient


class FiveWays(nn.Module):
    """A parameter gets no gradient: never used, output dropped, detach, no_grad, named block;
    plus a frozen block and a trained head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.unused = nn.Linear(8, 8)
        self.aux = nn.Linear(8, 2)
        self.enc = nn.Linear(8, 8)
        self.ng = nn.Linear(8, 8)
        self.blk = nn.Linear(8, 8)
        self.frozen = nn.Linear(8, 8).requires_grad_(False)
        self.out = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.body(x).relu()
        aux = self.aux(h)  # output dropped by the loss
        c = self.enc(h).detach()  # cut: detach
        with torch.no_grad():
            d = self.ng(h)  # cut: no_grad
        e = stop_gradient(self.blk(h), name="test.blk")
        return self.out(self.frozen(h) + c + d + e), aux


def _line(marker: str) -> int:
    lines, start = inspect.getsourcelines(FiveWays)
    return start + next(i for i, text in enumerate(lines) if text.rstrip().endswith(marker))


@pytest.fixture
def model_and_step(seed):
    torch.manual_seed(seed)
    model, x = FiveWays(), torch.randn(3, 4)
    return model, lambda: model(x)[0].pow(2).mean()


def test_each_reason_with_its_line(model_and_step) -> None:
    model, step = model_and_step
    found = explain_unused_parameters(model, step)
    kinds = {p.name: p.kind for p in found.unused}
    assert kinds == {**dict.fromkeys(["unused.weight", "unused.bias"], "not_used"),
                     **dict.fromkeys(["aux.weight", "aux.bias"], "no_graph"),
                     **dict.fromkeys(["enc.weight", "enc.bias"], "detach"),
                     **dict.fromkeys(["ng.weight", "ng.bias"], "no_grad"),
                     **dict.fromkeys(["blk.weight", "blk.bias"], "block")}
    assert [p.name for p in found.unused] == [n for n, _ in model.named_parameters()
                                              if n in kinds]  # DDP's order
    lines = {p.name.split(".")[0]: p.line for p in found.unused}
    assert lines["aux"] == f"called at test_unused.py:{_line('# output dropped by the loss')} " \
                           "(forward)"
    assert lines["enc"] == f"at test_unused.py:{_line('# cut: detach')} (forward)"
    assert lines["ng"] == f"at test_unused.py:{_line('# cut: no_grad')} (forward)"
    assert lines["unused"] == (f"defined at test_unused.py:{_line('self.unused = nn.Linear(8, 8)')} "
                               "(FiveWays.__init__)")
    assert lines["blk"] is None  # named: the block's name says where
    reasons = {p.name.split(".")[0]: p.reason for p in found.unused}
    assert reasons["blk"] == "cut by stop_gradient 'test.blk'"
    assert reasons["unused"] == "never used in forward"
    assert found.frozen == ("frozen.weight", "frozen.bias") and not found.ok
    assert found.n_parameters == 14
    text = str(found)
    assert "10 of 14 parameters that require grad get no gradient" in text
    assert "DDP leaves them out and never names them): frozen.weight, frozen.bias" in text
    assert found.to_dict()["unused"][0]["name"] == "unused.weight"


def test_it_changes_nothing(model_and_step) -> None:
    model, step = model_and_step
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    explain_unused_parameters(model, step)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state())
    assert all(p.grad is None for p in model.parameters())


def test_a_clean_model_and_what_ddp_ignores(seed) -> None:
    torch.manual_seed(seed)
    model, x = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), torch.randn(5, 3)
    clean = explain_unused_parameters(model, lambda: model(x).sum())
    assert clean.ok and not clean.names and "all 4 parameters that require grad get" in str(clean)
    holder = nn.Module()
    holder.net, holder.spare = model, nn.Linear(2, 2)
    holder._ddp_params_and_buffers_to_ignore = ["spare.weight", "spare.bias"]  # as DDP sets it
    ignored = explain_unused_parameters(holder, lambda: holder.net(x).sum())
    assert ignored.ok and ignored.ignored == ("spare.weight", "spare.bias")
    frozen = nn.Linear(3, 1).requires_grad_(False)
    none = explain_unused_parameters(frozen, lambda: frozen(x).sum())
    assert none.ok and none.n_parameters == 0 and none.frozen == ("weight", "bias")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"explain_unused_parameters: model must be an nn\.Module"):
        explain_unused_parameters([torch.zeros(1)], lambda: torch.zeros(()))
    w = nn.Linear(2, 1)
    with pytest.raises(TypeError, match="audit_step: step must be a zero-argument callable"):
        explain_unused_parameters(w, "loss")
