"""What the watch's hooks cost between the iterations it records (``--watch N``): ``Tensor.grad``
is torch's own descriptor there (an optimizer's step reads every ``.grad`` and its
``zero_grad()`` writes every one, at no Python call), and the attribute's hook is back in place
for the next recorded iteration, where a gradient cleared by hand is still seen."""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path

import torch

from toolkit.audit.kinds import Kind
from toolkit.audit.script.runner import run_script
from toolkit.audit.script.session import Watch

# a script that writes down, at each iteration after its backward(), whether ``Tensor.grad`` is
# torch's own descriptor
SEEN = """
import inspect, json, sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
own = []
for it in range(12):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    own.append(inspect.isgetsetdescriptor(torch.Tensor.grad))
    opt.step()
with open(sys.argv[1], "w") as fh:
    json.dump(own, fh)
"""

# a warm-up, then a main loop that accumulates two micro-batches but clears the gradient by hand
# before each backward(): the step trains on the last micro-batch only
CLEARED_LATE = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(6):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
for it in range(6):
    opt.zero_grad()
    for k in range(2):
        for p in model.parameters():
            p.grad = None
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
    opt.step()
"""


def _script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def test_between_recorded_iterations_tensor_grad_is_torchs_own(tmp_path: Path) -> None:
    out = tmp_path / "own.json"
    watch = Watch(every=5)
    run_script(_script(tmp_path, SEEN), [str(out)], watch)
    own = json.loads(out.read_text())
    # recorded: each audited iteration (0, 5, 10) and the one before it (4, 9)
    recorded = {0, 4, 5, 9, 10}
    assert [i for i, o in enumerate(own) if not o] == sorted(recorded)
    assert inspect.isgetsetdescriptor(torch.Tensor.grad)   # and after the run


def test_a_gradient_cleared_by_hand_after_unrecorded_iterations_is_still_seen(
        tmp_path: Path) -> None:
    watch = Watch(every=100)
    run_script(_script(tmp_path, CLEARED_LATE), [], watch)
    cleared = [f for f in watch.findings.values() if f.kind is Kind.CLEARED]
    assert [f.iteration for f in cleared] == [6]
    assert cleared[0].at[0].startswith("train.py:15: for p in model.parameters():")
    assert inspect.isgetsetdescriptor(torch.Tensor.grad)


# a script that notes, at each iteration, which ``nn.Module.__setattr__`` is in place, and keeps
# a tensor with a graph in a module's attribute (a state carried in the module)
SETATTR = """
import json, sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
seen, kept = [], []
for it in range(12):
    opt.zero_grad()
    out = model(torch.randn(8, 4))
    model.last = out.sum()
    kept.append(model.last is not None and model.last.grad_fn is not None)
    seen.append(id(nn.Module.__setattr__))
    out.pow(2).mean().backward()
    opt.step()
with open(sys.argv[1], "w") as fh:
    json.dump({"seen": seen, "kept": kept}, fh)
"""


def test_the_recordings_class_patches_stay_from_the_first_audit_to_the_end(
        tmp_path: Path) -> None:
    # patching ``nn.Module`` empties the attribute caches of each of its subclasses: the
    # recording's patch is put in once and taken out once, not at each audited iteration
    own = torch.nn.Module.__setattr__
    out = tmp_path / "seen.json"
    run_script(_script(tmp_path, SETATTR), [str(out)], Watch(every=5))
    seen = json.loads(out.read_text())
    assert len(set(seen["seen"])) == 1 and seen["seen"][0] != id(own)
    assert all(seen["kept"])   # assigned through the patch, recorded or not
    assert torch.nn.Module.__setattr__ is own   # and torch's own again after the run
