"""What the command line answers at the door: names from hostile folders printed escaped, a
config with a byte-order mark, the same config given twice, and SIGINT/SIGTERM in every
command (130/143 with one line)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from toolkit.lab import run_experiment
from toolkit.lab.cli import main

#: a newline, a carriage return, an escape and a right-to-left override: each would let a
#: folder's name rewrite what a terminal shows
HOSTILE = "a\nb\r\x1b[2J\u202eevil"


def _raw(text: str) -> list[str]:
    return [ch for ch in ("\r", "\x1b", "\u202e") if ch in text]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A results folder whose name, and whose run folders' names, carry :data:`HOSTILE`; one
    complete run and one copy of it that says ``running`` (abandoned)."""
    root = tmp_path / f"results{HOSTILE}"
    run = run_experiment("tiny_counter", {"n_steps": 2}, output_dir=root, dtype="float64")
    named = run.run_dir.with_name(run.run_dir.name + HOSTILE)
    run.run_dir.rename(named)
    copy = named.with_name("copy" + HOSTILE)
    shutil.copytree(named, copy)
    meta = json.loads((copy / "meta.json").read_text())
    (copy / "meta.json").write_text(json.dumps({**meta, "status": "running"}))
    return root


@pytest.mark.parametrize("command", ["check", "compare", "report"])
def test_hostile_names_are_escaped_in_every_line(command: str, hostile: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = next(p for p in (hostile / "tiny_counter").iterdir() if p.name.startswith("2"))
    target = {"check": hostile, "compare": hostile / "tiny_counter", "report": run_dir}[command]
    main([command, str(target)])
    out, err = capsys.readouterr()
    assert "\\u202e" in out + err  # the name was printed, escaped
    assert not _raw(out + err), out + err
    for line in (out + err).splitlines():  # no line starts with the tail of a cut name
        assert not line.startswith("b\\r") and not line.startswith("b\r")


def test_a_byte_order_mark_is_read_as_nothing(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bom.toml"
    config.write_bytes(b"\xef\xbb\xbf" + b'experiment = "tiny_counter"\nseed = 0\n')
    assert main(["run", str(config), "--dry-run", "--out", str(tmp_path / "r")]) == 0
    assert "1 run;" in capsys.readouterr().out


def test_the_same_config_twice_is_answered_as_repeated_seeds_are(
        tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tiny_config), str(tiny_config), "--out", str(tmp_path / "r")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"toolkit: error: {tiny_config}: is given twice (seed ")
    assert "give each config once" in line
    assert not (tmp_path / "r").exists()  # refused before anything ran
    copy = tmp_path / "copy.toml"
    shutil.copy(tiny_config, copy)
    assert main(["run", str(tiny_config), str(copy), "--out", str(tmp_path / "r")]) == 2
    assert f"gives the same run as {tiny_config}" in capsys.readouterr().err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize(("command", "where"), [
    ("report", "toolkit.lab.report.draw_report"),
    ("compare", "toolkit.lab.report.compare.compare_runs"),
    ("check", "toolkit.lab.results.view.check_tree"),
])
def test_a_signal_in_every_command_is_one_line_and_128_plus_it(
        command: str, where: str, signum: int, hostile: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    module, _, name = where.rpartition(".")

    def stopped(*args: object, **kwargs: object) -> None:  # the signal arrives mid-work
        os.kill(os.getpid(), signum)
        time.sleep(30)
        raise AssertionError("the signal was not taken")

    monkeypatch.setattr(module + "." + name, stopped)
    run_dir = next(p for p in (hostile / "tiny_counter").iterdir() if p.name.startswith("2"))
    target = {"check": hostile, "compare": hostile / "tiny_counter", "report": run_dir}[command]
    assert main([command, str(target)]) == 128 + signum
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"toolkit: interrupted by {signal.Signals(signum).name} (exit status "
                       f"{128 + signum})")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


@pytest.mark.parametrize("kind", ["a folder", "a FIFO", "/dev/null"])
def test_a_tls_file_of_the_wrong_kind_is_named_as_such(
        kind: str, tiny_config: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    wrong = {"a folder": tmp_path, "/dev/null": Path("/dev/null")}.get(kind, tmp_path / "fifo")
    if kind == "a FIFO":
        os.mkfifo(wrong)
    code = main(["run", str(tiny_config), "--executor", "dask", "--address",
                 "tls://127.0.0.1:1", "--tls-ca-file", str(pem), "--tls-cert", str(pem),
                 "--tls-key", str(wrong), "--out", str(tmp_path / "r")])
    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"--tls-key: {wrong}: is {kind}, not a PEM file" in line and "no such" not in line
