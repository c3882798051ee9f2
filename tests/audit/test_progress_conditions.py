"""``progress_conditions``: the conditions on the run's progress that a clear runs under, as the
``never_trained`` rule and the scheduled freeze read them. A test of a loop's variable or of a
name the loop assigns counts, in the frame of the clear or in a helper's guard clause whose
parameter the caller passes such a name; a flag set before the loop, a walk over a model's
tensors and an ``if __name__ == "__main__":`` around the whole run do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.audit.record.syntax import progress_conditions

SOURCE = '''\
import torch


def cancel(epoch, model, frozen_epochs):
    if epoch >= frozen_epochs:
        return
    for name, p in model.named_parameters():
        if "last" in name:
            p.grad = None


if __name__ == "__main__":
    flag, step = True, 0
    for epoch in range(3):
        for it in range(4):
            iteration = epoch * 4 + it
            if iteration < 5:
                for name, p in model.named_parameters():
                    if "prototypes" in name:
                        p.grad = None
            if flag:
                model.embed.weight.grad = None
            cancel(epoch, model, 1)
            cancel(0, model, 1)
            else_side = 1
    while step < 10:
        step += 1
        if step > 3:
            pass
        else:
            model.zero_grad()
'''


@pytest.mark.parametrize(("stack", "expected"), [
    ([20], [17]),             # the iteration the loop assigns; not the walk's name
    ([22], []),               # a flag set before the loop
    ([9, 23], [5]),           # a helper's guard clause on the epoch its caller passes
    ([9, 24], []),            # the same helper, passed a constant
    ([31], [28]),             # a while loop's counter, in the ``else`` branch
    ([14], []),               # the loop itself, under __main__ only
    ([1], []),                # no condition
    ([3], []),                # a blank line: no statement starts there
], ids=["iteration", "flag", "helper-guard", "helper-constant", "while-else", "loop", "import",
        "blank"])
def test_the_conditions_named(tmp_path: Path, stack: list[int], expected: list[int]) -> None:
    path = str(tmp_path / "train.py")
    Path(path).write_text(SOURCE, encoding="utf-8")
    assert progress_conditions([(path, n) for n in stack]) == [(path, n) for n in expected]


def test_a_file_that_does_not_parse_has_none(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("for x in range(3)\n    if x:\n        y = 1\n", encoding="utf-8")
    assert progress_conditions([(str(path), 3)]) == []
