"""Where a fix belongs when a finding's line is inside a function of the script
(:mod:`toolkit.audit.fixes.where_called`): the script's call of it is named, a cut of one
parameter moves to the one call that passes it, and a held or carried graph written by a
function that returns nothing is cut by ``@torch.no_grad()`` on it. Each edit is checked by
applying it to the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.audit.findings import ScriptFinding
from toolkit.audit.fixes.script_edits import apply_to_text, edit_at
from toolkit.audit.fixes.where_called import placed
from toolkit.audit.kinds import Kind

SCRIPT = '''\
import torch


class Bank:
    def __init__(self):
        self.memory = torch.zeros(3)

    def update(self, v, i):
        mixed = 0.5 * self.memory + 0.5 * v
        self.memory = mixed


class Other:
    def update(self, v, i):
        return v


def loss_of(output, target):
    return ((output - target) ** 2).mean()


bank = Bank()
other = Other()
x = torch.ones(3, requires_grad=True)
bank.update(x * 2, 0)
other.update(x, 1)
loss = loss_of(x, x + 1)
'''


def _script(tmp_path: Path, text: str = SCRIPT) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def _cut(path: Path, line: int, name: str):
    text = path.read_text().splitlines()[line - 1]
    col = text.index(name)
    return edit_at(str(path), (line, col), (line, col + len(name)), f"{name}.detach()")


def _finding(path: Path, line: int, kind: Kind, edits=()) -> ScriptFinding:
    text = path.read_text().splitlines()[line - 1].strip()
    return ScriptFinding(kind, 1, "m", ("t",), ("t",), (f"{path.name}:{line}: {text}",),
                         tuple(edits))


def _applied(path: Path, finding: ScriptFinding) -> list[str]:
    return apply_to_text(path.read_text(), finding.edits).splitlines()


def _scope(path: Path) -> dict:
    scope: dict = {"__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), scope)  # the test's own text
    return scope


def test_a_cut_parameter_moves_to_the_one_call_that_passes_it(tmp_path):
    path = _script(tmp_path)
    found = placed(_finding(path, 9, Kind.CARRIED, [_cut(path, 9, "v")]), _scope(path),
                   {path.name: str(path)})
    assert found.at[-1] == "train.py:25: bank.update(x * 2, 0)"
    (edit,) = found.edits
    assert (edit.line, edit.old, edit.new) == (25, "x * 2", "(x * 2).detach()")
    assert _applied(path, found)[24] == "bank.update((x * 2).detach(), 0)"


def test_another_class_s_method_of_the_same_name_is_not_its_call(tmp_path):
    path = _script(tmp_path)
    found = placed(_finding(path, 9, Kind.TARGET), _scope(path), {path.name: str(path)})
    assert found.at[1:] == ("train.py:25: bank.update(x * 2, 0)",)
    assert found.edits == ()


def test_a_graph_held_by_a_function_that_returns_nothing_with_no_edit_gets_no_grad(tmp_path):
    path = _script(tmp_path)
    found = placed(_finding(path, 10, Kind.HELD), _scope(path), {path.name: str(path)})
    assert found.at == ("train.py:10: self.memory = mixed", "train.py:25: bank.update(x * 2, 0)",
                        "train.py:8: def update(self, v, i):")
    assert [str(e) for e in found.edits] == ["train.py:8: insert before it: @torch.no_grad()"]


def test_without_the_names_every_call_by_that_name_counts_and_the_cut_stays(tmp_path):
    path = _script(tmp_path)
    cut = _cut(path, 9, "v")
    found = placed(_finding(path, 9, Kind.CARRIED, [cut]), {}, {path.name: str(path)})
    assert [a.split(":")[1] for a in found.at] == ["9", "25", "26", "8"]
    # two calls: which one passes the graph is not known, so the function's own cut stays;
    # a carried graph written by a function that returns nothing: no_grad on it
    (edit,) = found.edits
    assert edit.old == "" and edit.line == 8
    assert _applied(path, found)[7:9] == ["    @torch.no_grad()", "    def update(self, v, i):"]


def test_state_written_by_a_function_that_returns_nothing_gets_no_grad(tmp_path):
    path = _script(tmp_path)
    text = path.read_text().splitlines()[8]
    start = text.index("0.5 * self.memory")
    cut = edit_at(str(path), (9, start), (9, len(text)),
                  "(0.5 * self.memory + 0.5 * v).detach()")
    found = placed(_finding(path, 9, Kind.HELD, [cut]), _scope(path), {path.name: str(path)})
    assert [str(e) for e in found.edits] == ["train.py:8: insert before it: @torch.no_grad()"]


@pytest.mark.parametrize("kind", [Kind.TARGET, Kind.CONSTANT_TERM])
def test_a_cut_of_an_expression_of_one_parameter_moves_to_the_call(tmp_path, kind):
    path = _script(tmp_path)
    text = path.read_text().splitlines()[8]
    start = text.index("0.5 * v")
    cut = edit_at(str(path), (9, start), (9, len(text)), "(0.5 * v).detach()")
    found = placed(_finding(path, 9, kind, [cut]), _scope(path), {path.name: str(path)})
    assert _applied(path, found)[24] == "bank.update((x * 2).detach(), 0)"


@pytest.mark.parametrize("kind", [Kind.TARGET, Kind.CONSTANT_TERM])
def test_a_cut_of_an_expression_stays_where_the_function_reads_the_parameter_again(
        tmp_path, kind):
    # the call's cut would also cut ``v`` where the function returns it
    path = _script(tmp_path, SCRIPT.replace("        self.memory = mixed\n",
                                            "        self.memory = mixed\n        return v\n"))
    text = path.read_text().splitlines()[8]
    start = text.index("0.5 * v")
    cut = edit_at(str(path), (9, start), (9, len(text)), "(0.5 * v).detach()")
    found = placed(_finding(path, 9, kind, [cut]), _scope(path), {path.name: str(path)})
    assert found.edits == (cut,)


def test_a_helper_loss_s_target_is_cut_at_its_call(tmp_path):
    path = _script(tmp_path)
    found = placed(_finding(path, 19, Kind.TARGET, [_cut(path, 19, "target")]), _scope(path),
                   {path.name: str(path)})
    assert found.at[-1] == "train.py:27: loss = loss_of(x, x + 1)"
    assert _applied(path, found)[26] == "loss = loss_of(x, (x + 1).detach())"


def test_a_function_under_no_grad_already_or_that_returns_keeps_its_cut(tmp_path):
    text = SCRIPT.replace("    def update(self, v, i):\n        mixed",
                          "    @torch.no_grad()\n    def update(self, v, i):\n        mixed")
    path = _script(tmp_path, text)
    cut = _cut(path, 11, "mixed")
    assert placed(_finding(path, 11, Kind.HELD, [cut]), _scope(path),
                  {path.name: str(path)}).edits == (cut,)
    path = _script(tmp_path, SCRIPT)
    cut = _cut(path, 15, "v")
    found = placed(_finding(path, 15, Kind.HELD, [cut]), {}, {path.name: str(path)})
    assert found.edits == (cut,)


def test_the_module_s_own_code_and_a_file_not_the_user_s_are_left_as_they_are(tmp_path):
    path = _script(tmp_path)
    at_top = _finding(path, 25, Kind.CARRIED, [_cut(path, 25, "x")])
    assert placed(at_top, _scope(path), {path.name: str(path)}) is at_top
    inside = _finding(path, 9, Kind.CARRIED)
    assert placed(inside, _scope(path), {}) is inside


def test_no_grad_brings_its_import_where_the_file_has_none(tmp_path):
    text = SCRIPT.replace("import torch\n", "from torch import zeros, ones\n").replace(
        "torch.", "")
    path = _script(tmp_path, text)
    cut = _cut(path, 10, "mixed")
    found = placed(_finding(path, 10, Kind.HELD, [cut]), {}, {path.name: str(path)})
    assert [e.new for e in found.edits] == ["import torch\n", "    @torch.no_grad()\n"]
    assert "import torch" in _applied(path, found)
