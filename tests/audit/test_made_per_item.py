"""The edit of the ``shared`` finding for members made by multiplying a list
(:func:`toolkit.audit.fixes.copy_edits.made_per_item`): ``[make()] * n`` and ``n * [make()]``
become ``[make() for _ in range(n)]``; anything else, or an assignment made twice, is left as it
is (no edit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.audit.fixes.copy_edits import made_per_item
from toolkit.audit.fixes.script_edits import apply_to_text


def _made(tmp_path: Path, source: str, name: str = "members"):
    path = tmp_path / f"case_{abs(hash(source))}.py"
    path.write_text(source)
    return made_per_item(str(path), name)


@pytest.mark.parametrize(("line", "fixed"), [
    ("members = [Net(width=4)] * args.k\n", "members = [Net(width=4) for _ in range(args.k)]\n"),
    ("members = 3 * [Net()]\n", "members = [Net() for _ in range(3)]\n"),
])
def test_a_list_of_one_network_multiplied_is_made_one_per_item(tmp_path, line, fixed):
    source = f"import torch\n{line}print(members)\n"
    found = _made(tmp_path, source)
    assert found is not None
    number, edits = found
    assert number == 2
    assert apply_to_text(source, edits) == f"import torch\n{fixed}print(members)\n"


@pytest.mark.parametrize("source", [
    "members = [0.0] * 3\n",                          # numbers: nothing is shared
    "members = [Net(), Net()] * 2\n",                 # two items: which one is meant?
    "members = [Net()] * 2\nmembers = [Net()] * 3\n",  # assigned twice: which one ran?
    "others = [Net()] * 3\n",                         # another name
])
def test_anything_else_gets_no_edit(tmp_path, source):
    assert _made(tmp_path, source) is None
