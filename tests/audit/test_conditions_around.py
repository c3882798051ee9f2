"""``conditions_around``: the ``if`` statements that guard a line, as the ``never_trained`` rule
names them: a function's own, or at a module's top level those inside the outermost loop (never
an ``if __name__ == "__main__":`` around the whole run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.audit.record.syntax import conditions_around

SOURCE = '''\
import torch


def cancel(model, warm):
    if warm:
        for p in model.parameters():
            if p.ndim > 1:
                p.grad = None


if __name__ == "__main__":
    for epoch in range(3):
        for it in range(4):
            if epoch < 2:
                cancel(None, True)
            else:
                x = 1
                if it:
                    y = 2
    if epoch:
        z = 3
'''


@pytest.mark.parametrize(("line", "expected"), [
    (8, [7, 5]),      # in a helper: its own ifs, inside and outside its loop
    (15, [14]),       # at the top level, inside the loops: not the __main__ guard
    (17, [14]),       # an ``else`` branch is guarded by its ``if`` too
    (19, [18, 14]),   # innermost first
    (12, []),         # the outermost loop itself: nothing inside a loop guards it
    (21, []),         # outside every loop at the top level
    (1, []),          # no condition
    (3, []),          # a blank line: no statement starts there
], ids=["helper", "top-level", "else", "nested", "loop", "after-loop", "import", "blank"])
def test_the_conditions_named(tmp_path: Path, line: int, expected: list[int]) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE, encoding="utf-8")
    assert conditions_around(str(path), line) == expected


def test_a_file_that_does_not_parse_has_none(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("for x in range(3)\n    if x:\n        y = 1\n", encoding="utf-8")
    assert conditions_around(str(path), 3) == []
