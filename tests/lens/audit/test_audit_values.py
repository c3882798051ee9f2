"""Reading what an expression of the user's code holds from its syntax tree, running nothing."""

import types

import pytest
import torch
from torch import nn

from toolkit.audit.record.values import read_value


class _Holder:
    calls = 0

    def __init__(self) -> None:
        self.state = {"hidden": torch.zeros(2)}
        self.items = [torch.ones(1)]

    @property
    def computed(self) -> torch.Tensor:
        type(self).calls += 1
        return torch.ones(3)

    def __getattr__(self, name: str) -> object:
        type(self).calls += 1
        return torch.ones(4)


def test_stored_values_are_read_through_names_attributes_and_items() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ModuleDict({"head": nn.Linear(3, 1)}))
    holder = _Holder()
    names = {"model": model, "holder": holder, "nn": nn, "flag": True}
    assert read_value("model[0].weight", "t.py", names) is model[0].weight
    assert read_value("model[1]['head'].bias", "t.py", names) is model[1]["head"].bias
    assert read_value("holder.state['hidden']", "t.py", names) is holder.state["hidden"]
    assert read_value("holder.items[0]", "t.py", names) is holder.items[0]
    assert read_value("nn.Linear", "t.py", names) is nn.Linear
    assert read_value("model[0] if flag else holder", "t.py", names) is model[0]
    # a later namespace is read when an earlier one does not hold the name (locals, globals)
    assert read_value("model", "t.py", {}, names) is model


@pytest.mark.parametrize("text", ["holder.computed", "holder.missing", "holder.items[3]",
                                  "holder.state['other']", "len(holder.items)", "unknown",
                                  "holder.items[0] if holder.items else holder"])
def test_what_only_running_code_could_read_is_a_lookup_error(text: str) -> None:
    holder = _Holder()
    before = _Holder.calls
    with pytest.raises(LookupError):
        read_value(text, "t.py", {"holder": holder, "len": len})
    assert _Holder.calls == before  # no property, no __getattr__ ran


def test_a_module_attribute_and_a_class_attribute_are_read_as_stored() -> None:
    module = types.ModuleType("m")
    module.x = torch.ones(1)  # type: ignore[attr-defined]
    assert read_value("m.x", "t.py", {"m": module}) is module.x  # type: ignore[attr-defined]
    assert read_value("H.calls", "t.py", {"H": _Holder}) == _Holder.calls
