"""``toolkit audit SCRIPT`` on a script that trains on a device: the watch's hooks, its exact-zero
tests and the rerun that verifies an edit read tensors wherever the script keeps them. The same
scripts run on the CPU here and on CUDA where a device is present (the CUDA cases skip without
one): a clean self-training script is clean, its bug twin (pseudo-labels not detached, after
Xie et al., "Self-training with Noisy Student", arXiv:1911.04252) is a ``target`` failure whose
verified edit trains as the clean script."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from script_audit import check_fix

DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(
               not torch.cuda.is_available(), reason="needs a CUDA device"))]

SCRIPT = '''\
import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
device = torch.device("{device}")

dim, classes = 6, 3
centers = torch.randn(classes, dim) * 2
labels = torch.randint(0, classes, (64,))
labeled = (centers[labels] + torch.randn(64, dim)).to(device)
labels = labels.to(device)
unlabeled = (centers[torch.randint(0, classes, (256,))] + torch.randn(256, dim)).to(device)

teacher = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes)).to(device)
student = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes)).to(device)
optimizer = torch.optim.SGD([*teacher.parameters(), *student.parameters()], lr=0.1)

for step in range(args.steps):
    i = step % 4
    x, y = labeled[16 * i:16 * i + 16], labels[16 * i:16 * i + 16]
    xu = unlabeled[64 * i:64 * i + 64]
    soft = F.softmax({teacher_output}, dim=1)
    unsup = -(soft * F.log_softmax(student(xu), dim=1)).sum(1).mean()
    loss = F.cross_entropy(student(x), y) + unsup
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

if args.out:
    torch.save({{k: v.cpu() for k, v in student.state_dict().items()}}, args.out)
'''
LINE = 29   # the line that reads the teacher: where the fix belongs


def _write(folder: Path, name: str, device: str, teacher_output: str) -> None:
    (folder / name).write_text(SCRIPT.format(device=device, teacher_output=teacher_output),
                               encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_a_target_on_the_device_is_found_and_its_edit_trains_as_the_clean_script(tmp_path,
                                                                                 device):
    folder = tmp_path / "proj"
    folder.mkdir()
    _write(folder, "published.py", device, "teacher(xu).detach()")
    _write(folder, "train.py", device, "teacher(xu)")
    done = check_fix(tmp_path, folder, "target")
    assert f"train.py:{LINE}:" in done.stdout, done.stdout
    fixed = (folder / "train.py").read_text(encoding="utf-8").splitlines()[LINE - 1]
    assert "teacher(xu).detach()" in fixed
