"""Property: however one results file is damaged, `check`, `compare` and `report` never say
"unexpected", never touch anything outside the folder, and agree on what is damaged: `check`
names the file, and `compare` and `report` warn naming it and go on (issue 43).

The default run tries a few examples (a few seconds); a longer search runs by hand:
``TOOLKIT_FUZZ=long python -m pytest -n 0 tests/lab/runner/test_fuzz_readers.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runner_testutil import FIXTURES

from toolkit.lab.cli import main

settings.register_profile("fuzz-default", max_examples=6, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz-long", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile(f"fuzz-{os.environ.get('TOOLKIT_FUZZ', 'default')}")

#: (folder, file): the files of a run (the second seed's) and of its seed group
TARGETS = [("run", name) for name in ("meta.json", "config.toml", "summary.json", "costs.json",
                                      "findings.json", "metrics.jsonl", "artifacts/curve.npz",
                                      "artifacts/extra.json")] + \
          [("group", name) for name in ("group.json", "findings.json", "config.toml")]
#: ways that always leave a damaged file
ALWAYS = {"fifo", "folder", "link_out", "enormous", "deep"}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two complete runs of the tiny experiment and their seed group."""
    out = tmp_path_factory.mktemp("fuzz") / "results"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLKIT_EXPERIMENTS_PATH", str(FIXTURES / "experiments"))
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["run", str(FIXTURES / "tiny.toml"), "--seeds", "0,1", "--out",
                         str(out), "--no-report", "--quiet"]) == 0
    for run in _folders(out)[:2]:
        (run / "artifacts" / "extra.json").write_text('{"xs": [1, 2, 3]}\n')
    return out


def _folders(results: Path) -> list[Path]:
    """The two runs (seed order) and the seed group."""
    found = sorted((results / "tiny_counter").iterdir())
    runs = [p for p in found if (p / "meta.json").exists()]
    groups = [p for p in found if (p / "group.json").exists()]
    return [*runs, *groups]


def _values(value: Any, at: tuple = ()) -> list[tuple]:
    """Every path to a value inside a parsed document."""
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _values(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _values(v, (*at, i))
    return found


def _replace(value: Any, at: tuple, new: Any) -> Any:
    if not at:
        return new
    head, *rest = at
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


def _npy_header(shape: tuple, pad: int) -> bytes:
    """An ``.npy`` (format 2.0) that is all header: ``shape`` claimed, no data, ``pad``
    spaces more header than numpy reads."""
    text = repr({"descr": "<f8", "fortran_order": False, "shape": shape}) + " " * pad + "\n"
    return b"\x93NUMPY\x02\x00" + len(text).to_bytes(4, "little") + text.encode()


def _damage(path: Path, how: str, draw: Any, outside: Path) -> None:
    """Damage the file at ``path`` in the way ``how``; ``draw`` draws what the way needs."""
    data = path.read_bytes()
    kind = path.suffix
    if how in ("fifo", "folder", "link_out", "enormous"):
        path.unlink()
        if how == "fifo":
            os.mkfifo(path)
        elif how == "folder":
            path.mkdir()
        elif how == "link_out":
            path.symlink_to(outside / "target")
        else:
            with path.open("wb") as fh:  # sparse: no disk used
                fh.truncate(300 * 2**20)
        return
    if how == "truncated":
        path.write_bytes(data[:draw(st.integers(0, max(0, len(data) - 1)))])
    elif how == "garbage":
        path.write_bytes(draw(st.binary(max_size=40)))
    elif how == "deep":
        depth = draw(st.sampled_from([101, 1500, 200_000]))
        deep = b"[" * depth + b"]" * depth
        path.write_bytes({".json": b'{"a": ' + deep + b"}", ".toml": b"a = " + deep + b"\n",
                          ".jsonl": data + b'{"step": 9, "a": ' + deep + b"}\n",
                          ".npz": b"PK" + deep}[kind])
    elif how == "huge_header" and kind == ".npz":
        shape = draw(st.sampled_from([(2**40,), (10**6, 10**6), (3,)]))
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("blocked.npy", _npy_header(shape, draw(st.sampled_from([0, 70000]))))
    elif how == "huge_header":
        key = "k" * draw(st.sampled_from([300, 200_000]))
        path.write_bytes(data.replace(b"\n", f'\n"{key}" = 1\n'.encode(), 1) if kind == ".toml"
                         else data.replace(b"{", f'{{"{key}": 1, '.encode(), 1))
    elif how in ("wrong_type", "huge_int") and kind in (".json", ".toml", ".jsonl"):
        # a huge integer goes in as a placeholder string, written out as digits at the end
        new = JSON if how == "wrong_type" else st.just("__HUGE__")
        huge = str(draw(st.sampled_from([2**64, 10**400, -(10**4000)])))
        huge = huge if how == "huge_int" else "__HUGE__"
        if kind == ".jsonl":
            lines = data.decode().splitlines()
            i = draw(st.integers(0, len(lines) - 1))
            row = json.loads(lines[i])
            at = draw(st.sampled_from(_values(row)))
            lines[i] = json.dumps(_replace(row, at, draw(new)))
            path.write_text(("\n".join(lines) + "\n").replace('"__HUGE__"', huge))
            return
        doc = json.loads(data) if kind == ".json" else tomllib.loads(data.decode())
        at = draw(st.sampled_from(_values(doc)[1:] or [()]))
        value = _replace(doc, at, draw(new))
        if kind == ".json" or not isinstance(value, dict):
            text = json.dumps(value)
        else:
            try:
                text = tomli_w.dumps(value)
            except (TypeError, ValueError):  # not writable as TOML: a JSON line instead
                text = json.dumps(value)
        path.write_text(text.replace('"__HUGE__"', huge))
    else:  # a way that does not apply to this kind of file: cut it short instead
        path.write_bytes(data[: len(data) // 2])


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue() + err.getvalue()


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


@settings(PROFILE)
@given(target=st.sampled_from(TARGETS),
       how=st.sampled_from(["truncated", "garbage", "deep", "wrong_type", "huge_int",
                            "huge_header", "fifo", "folder", "link_out", "enormous"]),
       data=st.data())
def test_one_damaged_file_is_named_and_nothing_else_happens(
        template: Path, target: tuple[str, str], how: str, data: st.DataObject) -> None:
    # (the fixture experiments are on the path: conftest.py, for the whole module)
    with tempfile.TemporaryDirectory() as tmp:
        results, outside = Path(tmp) / "results", Path(tmp) / "outside"
        shutil.copytree(template, results)
        outside.mkdir()
        (outside / "target").write_text('{"not": "the lab\'s"}\n')
        _, bad, group = _folders(results)
        folder = bad if target[0] == "run" else group
        path = folder / target[1]
        _damage(path, how, data.draw, outside)
        before = _snapshot(outside)

        code, said = _run(["check", str(results)])
        assert "unexpected" not in said and "Traceback" not in said, said
        # the damaged files, each inside the damaged folder (a meta.json changed may make
        # its config.toml disagree with it: that file is named then)
        named = {Path(line.removeprefix("damaged: ").split(": ", 1)[0])
                 for line in said.splitlines() if line.startswith("damaged: ")}
        assert all(folder in p.parents for p in named), said
        assert code == (1 if named else 0), said
        if how in ALWAYS:
            assert path in named, said

        def warned(text: str, files: set[Path]) -> bool:
            return any(f"toolkit: warning: {p}: " in text for p in files)

        code, said = _run(["compare", str(results)])
        assert "unexpected" not in said and "Traceback" not in said, said
        assert code == 0, said
        if target[0] == "run":  # compare reads no artifacts: their damage is not its business
            read = {p for p in named if "artifacts" not in p.relative_to(folder).parts}
            assert warned(said, read) == bool(read), said

        code, said = _run(["report", str(folder)])
        assert "unexpected" not in said and "Traceback" not in said, said
        assert code == (1 if named else 0), said
        assert warned(said, named) == bool(named), said
        assert _snapshot(outside) == before
