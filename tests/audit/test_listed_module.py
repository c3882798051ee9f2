"""The edit that lists a network an optimizer left out where the script lists the others
(:func:`toolkit.audit.fixes.script_edits.listed_module`): for each way a script gathers several
networks' tensors into the list an optimizer (and a clip) is built over, the edited line holds
the network too, and builds the list that holds all of them; the lines it writes nothing for."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from toolkit.audit.fixes.script_edits import apply_to_text, listed_module

NETS = "a, b, c = nn.Linear(2, 2), nn.Linear(2, 3), nn.Linear(3, 1)\n"


@pytest.mark.parametrize(("listing", "written"), [
    ("params = [p for m in (a, b) for p in m.parameters()]",
     "params = [p for m in (a, b, c) for p in m.parameters()]"),
    ("params = list(p for m in [a, b] for p in m.parameters())",
     "params = list(p for m in [a, b, c] for p in m.parameters())"),
    ("params = [*a.parameters(), *b.parameters()]",
     "params = [*a.parameters(), *b.parameters(), *c.parameters()]"),
    ("params = list(a.parameters()) + list(b.parameters())",
     "params = list(a.parameters()) + list(b.parameters()) + list(c.parameters())"),
    ("params = itertools.chain(a.parameters(), b.parameters())",
     "params = itertools.chain(a.parameters(), b.parameters(), c.parameters())"),
])
def test_the_network_is_listed_as_the_others_are(tmp_path: Path, listing: str,
                                                 written: str) -> None:
    text = (f"import itertools\nimport torch\nfrom torch import nn\n{NETS}{listing}\n"
            "opt = torch.optim.SGD(params, lr=0.1)\n")
    script = tmp_path / "train.py"
    script.write_text(text)
    edit = listed_module(str(script), text.count("\n"), "c")
    assert edit is not None
    edited = apply_to_text(text, [edit])
    assert edited == text.replace(listing, written)
    scope: dict = {"nn": nn}
    exec(compile(edited.replace("opt = torch.optim.SGD(params, lr=0.1)\n", ""), "x", "exec"),
         scope)
    held = {id(p) for p in scope["params"]}
    assert held == {id(p) for m in (scope["a"], scope["b"], scope["c"]) for p in m.parameters()}


@pytest.mark.parametrize("listing", [
    "params = a.parameters()",                        # one network: replaced, not listed
    "params = [p for p in a.parameters() if p.ndim > 1]",   # a filter of one network
    "params = [a.weight, b.weight]",                  # tensors, not networks
    "params = [{'params': a.parameters()}, {'params': b.parameters()}]",   # groups
])
def test_no_edit_where_the_list_is_no_list_of_networks(tmp_path: Path, listing: str) -> None:
    text = f"import torch\nfrom torch import nn\n{NETS}{listing}\nopt = torch.optim.SGD(params)\n"
    script = tmp_path / "train.py"
    script.write_text(text)
    assert listed_module(str(script), text.count("\n"), "c") is None
