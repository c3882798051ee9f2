"""The held-out training scripts for ``toolkit audit SCRIPT`` (issue 71, item 1), checked without
the audit: the oracle is sound, for every batch (``held_out_scripts/``, ``held_out_scripts_b/``
written after the audit's rules were tuned on the first, ``held_out_scripts_c/``, eight
fields of graphs kept in state or carried across iterations, ``held_out_scripts_d/``, eleven
fields of mixed bugs written without running the audit, ``held_out_scripts_e/``, twelve more
fields of mixed bugs, also written without running the audit, ``held_out_scripts_f/``, twelve
fields more of mixed bugs written the same way, ``held_out_scripts_g/``, twelve fields more,
also written without running the audit, ``held_out_scripts_h/``, twelve fields more, written
the same way once the script mode ran on the audit's stages, ``held_out_scripts_i/``, twelve
fields more, written before the rules changed that the eighth batch's misses asked for, and
``held_out_scripts_j/``, twelve fields more, written before the rules changed that the ninth
batch's misses asked for, ``held_out_scripts_k/``, twelve fields more, written before the
rules changed that the tenth batch's misses asked for, and ``held_out_scripts_l/``, twelve
fields more, written before the rules changed that the eleventh batch's misses asked for).
Every script runs to its end and saves its weights; every bug twin trains differently from its
correct twin (some saved tensor differs by more than 1e-5), and the correct twin trains the same
way twice. The audit's accuracy on these scripts is measured by
``benchmarks/audit_held_out_scripts.py``; the scripts are never edited.

The scripts never change, so neither does what the oracle finds of them, for one version of
torch: ``held_out_scripts.lock.json`` holds, for each batch whose oracle passed, the SHA-256 of
its files, and the torch it ran on. A batch whose files hash as the lock says, on that torch,
is vouched for: its files are checked against the lock (any edit fails) and its scripts are
not run again. A batch the lock does not vouch for (a new one, an edited one, another torch)
runs the whole oracle. ``HELD_OUT_ORACLE=all`` runs it for every batch, and
``python tests/audit/test_held_out_scripts.py --lock`` runs it so and, when it passes, writes
the lock.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import filelock
import pytest
import torch

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
# The first batch, a second written after the audit's rules were tuned on the first, a third
# (graphs kept in state or carried across iterations) written after the rules of the first two,
# a fourth (mixed bugs) written after the rules of the first three, a fifth (mixed bugs, in
# fields none of the others holds) written after the rules of the first four, and a sixth (mixed
# bugs, in twelve fields more) written after the rules of the first five, a seventh (mixed bugs,
# twelve fields more) written after the rules of the first six, an eighth (mixed bugs, twelve
# fields more) written after the script mode left its own package for the audit's stages, a
# ninth (mixed bugs, twelve fields more) written before the rules the eighth's misses asked for,
# a tenth (mixed bugs, twelve fields more) written before the rules the ninth's asked for, an
# eleventh (mixed bugs, twelve fields more) written before the rules the tenth's asked for,
# a twelfth (mixed bugs, twelve fields more) written before the rules the eleventh's asked for,
# and a thirteenth to a twenty-sixth (the same), each before the rules its predecessor's misses
# asked for, a twenty-seventh written after the rules the twenty-sixth's misses asked for,
# a twenty-eighth written after the rules the twenty-seventh's misses asked for, a
# twenty-ninth written after the rules the twenty-eighth's misses asked for, a thirtieth
# written after the rules the twenty-ninth's misses asked for, and a thirty-first written after
# the rules the thirtieth's misses asked for.
FOLDERS = {name: HERE / name
           for name in ("held_out_scripts", "held_out_scripts_b", "held_out_scripts_c",
                        "held_out_scripts_d", "held_out_scripts_e", "held_out_scripts_f",
                        "held_out_scripts_g", "held_out_scripts_h", "held_out_scripts_i",
                        "held_out_scripts_j", "held_out_scripts_k",
                        "held_out_scripts_l", "held_out_scripts_m", "held_out_scripts_n",
                        "held_out_scripts_o", "held_out_scripts_p", "held_out_scripts_q",
                        "held_out_scripts_r", "held_out_scripts_s",
                        "held_out_scripts_t", "held_out_scripts_u",
                        "held_out_scripts_v", "held_out_scripts_w",
                        "held_out_scripts_x", "held_out_scripts_y", "held_out_scripts_z",
                        "held_out_scripts_aa", "held_out_scripts_ab",
                        "held_out_scripts_ac", "held_out_scripts_ad",
                        "held_out_scripts_ae")}
# The least each batch holds: (scripts, fields); the third batch is eight fields of two scripts,
# the fourth eleven, the fifth twelve (two of them with two bug twins), the sixth twelve (five of
# them with two bug twins), the seventh twelve (four of them with two bug twins), the eighth
# twelve (six of them with two bug twins), the ninth twelve (eight of them with two bug twins),
# the tenth twelve (nine of them with two bug twins), the eleventh twelve (eleven of them with
# two bug twins), the twelfth twelve (eleven of them with two bug twins), the thirteenth twelve
# (eleven of them with two bug twins), the fourteenth to the thirty-first twelve (each with
# two bug twins).
SIZES = {"held_out_scripts": (20, 10), "held_out_scripts_b": (20, 10),
         "held_out_scripts_c": (16, 8), "held_out_scripts_d": (22, 11),
         "held_out_scripts_e": (26, 12), "held_out_scripts_f": (29, 12),
         "held_out_scripts_g": (28, 12), "held_out_scripts_h": (30, 12),
         "held_out_scripts_i": (32, 12), "held_out_scripts_j": (33, 12),
         "held_out_scripts_k": (35, 12), "held_out_scripts_l": (35, 12),
         "held_out_scripts_m": (35, 12), "held_out_scripts_n": (36, 12),
         "held_out_scripts_o": (36, 12), "held_out_scripts_p": (36, 12),
         "held_out_scripts_q": (36, 12), "held_out_scripts_r": (36, 12),
         "held_out_scripts_s": (36, 12), "held_out_scripts_t": (36, 12),
         "held_out_scripts_u": (36, 12), "held_out_scripts_v": (36, 12),
         "held_out_scripts_w": (36, 12), "held_out_scripts_x": (36, 12),
         "held_out_scripts_y": (36, 12), "held_out_scripts_z": (36, 12),
         "held_out_scripts_aa": (36, 12),
         "held_out_scripts_ab": (36, 12), "held_out_scripts_ac": (36, 12),
         "held_out_scripts_ad": (36, 12), "held_out_scripts_ae": (36, 12)}
MANIFESTS = {name: tomllib.loads((folder / "cases.toml").read_text(encoding="utf-8"))
             for name, folder in FOLDERS.items()}
CLEAN = {name: [entry["script"] for entry in m["clean"]] for name, m in MANIFESTS.items()}
BUGS = {name: {entry["script"]: entry for entry in m["bug"]} for name, m in MANIFESTS.items()}
TOLERANCE = 1e-5
#: each batch's process on one thread: pytest-xdist runs one per core, and tiny scripts on two
#: threads each, two processes to two cores, wait on each other
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
LOCK = HERE / "held_out_scripts.lock.json"
TORCH = torch.__version__.split("+")[0]


def digest(folder: Path) -> str:
    """The SHA-256 of a batch's files (its scripts and manifest, by their path in it)."""
    h = hashlib.sha256()
    for path in sorted([*folder.glob("*/*.py"), folder / "cases.toml"]):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _vouched() -> set[str]:
    """The batches the lock vouches for: their files as it hashed them, on its torch."""
    if os.environ.get("HELD_OUT_ORACLE") == "all" or not LOCK.exists():
        return set()
    lock = json.loads(LOCK.read_text(encoding="utf-8"))
    if lock.get("torch") != TORCH:
        return set()
    return {b for b, d in lock.get("batches", {}).items()
            if b in FOLDERS and d == digest(FOLDERS[b])}


VOUCHED = _vouched()


def cases(which) -> list:
    """``(batch, script)`` pairs of every batch the lock does not vouch for, with readable
    ids."""
    return [pytest.param(name, script, id=f"{name}/{script}")
            for name in FOLDERS if name not in VOUCHED for script in which(name)]


def flat(tree, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor of a saved (possibly nested) dict of state_dicts, by dotted name."""
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    out: dict[str, torch.Tensor] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


#: runs each ``SCRIPT OUT`` pair named after it, one after the other, as ``python SCRIPT --out
#: OUT`` would in the script's folder (its own ``sys.argv``, ``__main__`` and ``sys.path``)
_RUN_EACH = """\
import os
import runpy
import sys

pairs = sys.argv[1:]
for script, out in zip(pairs[::2], pairs[1::2]):
    folder = os.path.dirname(script)
    os.chdir(folder)
    sys.argv = [script, "--out", out]
    sys.path.insert(0, folder)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
    finally:
        sys.path.remove(folder)
"""


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """Runs each script once (on demand) with ``--out`` and returns its saved tensors.

    Once in the whole session: pytest-xdist's workers share one folder (their base temporary
    folder's parent), and a worker that needs a run another has made, or is making, waits for
    its file instead of running the script again. The scripts of a batch run one after the
    other in one process (each seeds itself; starting a process, with torch's import and its
    compiler's, which building an optimizer imports, is most of a tiny script's time); the
    second attempt of a batch's correct twins is one process of its own, so a twin that trains
    the same way twice does so across processes and neighbours."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "held_out_scripts"
    root.mkdir(exist_ok=True)
    cache: dict[tuple[str, str, int], dict[str, torch.Tensor]] = {}

    def out_of(batch: str, script: str, attempt: int) -> Path:
        return root / f"{batch}__{script.replace('/', '__')}.{attempt}.pt"

    def run(batch: str, script: str, attempt: int = 0) -> dict[str, torch.Tensor]:
        if (batch, script, attempt) not in cache:
            folder = FOLDERS[batch]
            group = ([*CLEAN[batch], *BUGS[batch]] if attempt == 0
                     else sorted({e["twin"] for e in BUGS[batch].values()}))
            assert script in group, (batch, script, attempt)
            lock = f"{batch}.{attempt}"
            with filelock.FileLock(root / f"{lock}.lock"):
                missing = [s for s in group if not out_of(batch, s, attempt).exists()]
                if missing:
                    pairs = [a for s in missing
                             for a in (str(folder / s), f"{out_of(batch, s, attempt)}.part")]
                    done = subprocess.run([sys.executable, "-c", _RUN_EACH, *pairs],
                                          capture_output=True, text=True, timeout=600,
                                          env={**os.environ, **ONE_THREAD})
                    assert done.returncode == 0, f"{batch} failed:\n{done.stderr[-3000:]}"
                    for s in missing:
                        os.replace(f"{out_of(batch, s, attempt)}.part", out_of(batch, s, attempt))
            cache[batch, script, attempt] = flat(torch.load(out_of(batch, script, attempt),
                                                            weights_only=True))
        return cache[batch, script, attempt]

    return run


@pytest.mark.parametrize("batch", sorted(FOLDERS))
def test_the_manifest_lists_every_script_once_in_enough_fields(batch):
    folder, clean, bugs = FOLDERS[batch], CLEAN[batch], BUGS[batch]
    on_disk = sorted(str(p.relative_to(folder)) for p in folder.glob("*/*.py"))
    listed = sorted([*clean, *bugs])
    assert listed == on_disk
    fields = {script.split("/")[0] for script in listed}
    least_scripts, least_fields = SIZES[batch]
    assert len(listed) >= least_scripts and len(fields) >= least_fields
    assert all(f"{field}/clean.py" in clean for field in fields)
    for script, entry in bugs.items():
        assert entry["twin"] in clean and entry["tensors"] and entry["kind"]
        lines = (folder / script).read_text(encoding="utf-8").splitlines()
        for line in [entry["line"], *entry.get("also", [])]:
            assert 1 <= line <= len(lines) and lines[line - 1].strip(), (script, line)


def test_the_lock_vouches_only_for_batches_as_their_oracle_passed():
    """Every batch the lock names is there, with the files it hashed (a held-out script edited
    after its oracle passed fails here, whichever torch runs)."""
    lock = json.loads(LOCK.read_text(encoding="utf-8"))
    assert set(lock["batches"]) <= set(FOLDERS)
    edited = [b for b, d in lock["batches"].items() if d != digest(FOLDERS[b])]
    assert not edited, f"held-out batches edited after their oracle passed: {edited}"


def test_the_batches_share_no_field():
    fields = {batch: {script.split("/")[0] for script in CLEAN[batch]} for batch in FOLDERS}
    for first, second in itertools.combinations(sorted(fields), 2):
        assert not fields[first] & fields[second], (first, second)


@pytest.mark.parametrize(("batch", "script"), cases(lambda b: [*CLEAN[b], *BUGS[b]]))
def test_the_script_runs_to_its_end_and_saves_its_weights(batch, script, trained):
    assert trained(batch, script)


def wide(t: torch.Tensor) -> torch.Tensor:
    """``t`` in double precision, a complex one (a Fourier layer's weights) as complex: its
    imaginary part counts too."""
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


@pytest.mark.parametrize(("batch", "script"), cases(lambda b: sorted(BUGS[b])))
def test_the_bug_trains_differently_from_its_correct_twin(batch, script, trained):
    twin = BUGS[batch][script]["twin"]
    bug, correct = trained(batch, script), trained(batch, twin)
    assert bug.keys() == correct.keys()
    gap = max((wide(bug[k]) - wide(correct[k])).abs().max().item() for k in correct)
    assert gap > TOLERANCE, f"{script} trains as {twin}: the oracle could not tell them apart"


@pytest.mark.parametrize(("batch", "script"),
                         cases(lambda b: sorted({e["twin"] for e in BUGS[b].values()})))
def test_the_correct_twin_trains_the_same_way_twice(batch, script, trained):
    first, second = trained(batch, script), trained(batch, script, attempt=1)
    assert all(torch.equal(first[k], second[k]) for k in first)


if __name__ == "__main__":
    # --lock: the whole oracle, for every batch; when it passes, the lock that vouches for them
    if sys.argv[1:] != ["--lock"]:
        sys.exit("usage: python tests/audit/test_held_out_scripts.py --lock")
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p",
                            "no:cacheprovider", "-k", "not test_the_lock_vouches", __file__],
                           env={**os.environ, "HELD_OUT_ORACLE": "all"})
    if code == 0:
        LOCK.write_text(json.dumps({"torch": TORCH, "batches": {
            b: digest(f) for b, f in FOLDERS.items()}}, indent=1, sort_keys=True) + "\n",
                        encoding="utf-8")
        print(f"wrote {LOCK.name}: {len(FOLDERS)} batches on torch {TORCH}")
    sys.exit(code)
