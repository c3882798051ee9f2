"""The objects alive before an audited script runs are kept out of the garbage collector's scans
while it runs (:func:`gc.freeze`) and given back after it, even where the script raises; a process
that froze objects of its own is left as it was."""

from __future__ import annotations

import gc

import pytest

from toolkit.audit.script.runner import run_script
from toolkit.audit.script.session import Watch

SCRIPT = """\
import gc
import sys
import torch
w = torch.ones(3, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
for _ in range(2):
    loss = (w * 2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with open(sys.argv[1], "w") as f:
    f.write(str(gc.get_freeze_count()))
if len(sys.argv) > 2:
    raise ValueError(sys.argv[2])
"""


@pytest.mark.parametrize("raises", [False, True])
def test_the_heap_is_frozen_during_the_run_and_given_back(tmp_path, raises):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    seen = tmp_path / "frozen.txt"
    assert gc.get_freeze_count() == 0
    outcome = run_script(str(script), [str(seen), *(["a bug"] if raises else [])],
                         Watch(every=1))
    assert isinstance(outcome.error, ValueError) if raises else outcome.error is None
    assert int(seen.read_text()) > 1000   # torch's modules, classes and functions at least
    assert gc.get_freeze_count() == 0


def test_a_heap_the_process_froze_is_left_frozen(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        run_script(str(script), [str(tmp_path / "frozen.txt")], Watch(every=1))
        # still frozen (less what the run let go of), not given back to the collector
        assert gc.get_freeze_count() > 0.9 * frozen
    finally:
        gc.unfreeze()
