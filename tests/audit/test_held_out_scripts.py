"""The held-out training scripts for ``toolkit audit SCRIPT`` (issue 71, item 1), checked without
the audit: the oracle is sound. Every script runs to its end and saves its weights; every bug
twin trains differently from its correct twin (some saved tensor differs by more than 1e-5),
and the correct twin trains the same way twice. The audit's accuracy on these scripts is
measured by ``benchmarks/audit_held_out_scripts.py``; the scripts are never edited.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

FOLDER = Path(__file__).parent / "held_out_scripts"
MANIFEST = tomllib.loads((FOLDER / "cases.toml").read_text(encoding="utf-8"))
CLEAN = [entry["script"] for entry in MANIFEST["clean"]]
BUGS = {entry["script"]: entry for entry in MANIFEST["bug"]}
TOLERANCE = 1e-5


def flat(tree, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a saved (possibly nested) dict of state_dicts, by dotted name."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    out: dict[str, torch.Tensor] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Runs each script once (on demand) with ``--out`` and returns its saved tensors."""
    root = tmp_path_factory.mktemp("held_out_scripts")
    cache: dict[tuple[str, int], dict[str, torch.Tensor]] = {}

    def run(script: str, attempt: int = 0) -> dict[str, torch.Tensor]:
        if (script, attempt) not in cache:
            out = root / f"{script.replace('/', '__')}.{attempt}.pt"
            done = subprocess.run([sys.executable, str(FOLDER / script), "--out", str(out)],
                                  cwd=FOLDER / script.split("/")[0], capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0, f"{script} failed:\n{done.stderr[-3000:]}"
            cache[script, attempt] = flat(torch.load(out, weights_only=True))
        return cache[script, attempt]

    return run


def test_the_manifest_lists_every_script_once_with_twenty_or_more_in_ten_fields_or_more():
    on_disk = sorted(str(p.relative_to(FOLDER)) for p in FOLDER.glob("*/*.py"))
    listed = sorted([*CLEAN, *BUGS])
    assert listed == on_disk
    fields = {script.split("/")[0] for script in listed}
    assert len(listed) >= 20 and len(fields) >= 10
    assert all(f"{field}/clean.py" in CLEAN for field in fields)
    for script, entry in BUGS.items():
        assert entry["twin"] in CLEAN and entry["tensors"] and entry["kind"]
        lines = (FOLDER / script).read_text(encoding="utf-8").splitlines()
        for line in [entry["line"], *entry.get("also", [])]:
            assert 1 <= line <= len(lines) and lines[line - 1].strip(), (script, line)


@pytest.mark.parametrize("script", [*CLEAN, *BUGS])
def test_the_script_runs_to_its_end_and_saves_its_weights(script, trained):
    assert trained(script)


@pytest.mark.parametrize("script", sorted(BUGS))
def test_the_bug_trains_differently_from_its_correct_twin(script, trained):
    twin = BUGS[script]["twin"]
    bug, correct = trained(script), trained(twin)
    assert bug.keys() == correct.keys()
    gap = max((bug[k].double() - correct[k].double()).abs().max().item() for k in correct)
    assert gap > TOLERANCE, f"{script} trains as {twin}: the oracle could not tell them apart"


@pytest.mark.parametrize("script", sorted({entry["twin"] for entry in BUGS.values()}))
def test_the_correct_twin_trains_the_same_way_twice(script, trained):
    first, second = trained(script), trained(script, attempt=1)
    assert all(torch.equal(first[k], second[k]) for k in first)
