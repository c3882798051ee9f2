"""A long experiment tells the command how far it is (issue 72): the first progress bar of
each experiment tells its part of the way, the command's bar moves with it while its count
stays the whole experiments that ended."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from toolkit.lab.execute.context import Progress, RunContext, RunFiles


def _context(tmp_path: Path, heard: list[Progress]) -> RunContext:
    files = RunFiles(tmp_path, listener=heard.append)
    return RunContext(run_dir=tmp_path, seed=0, device=torch.device("cpu"),
                      dtype=torch.float32, disable_patterns=("*",), quiet=True, _files=files)


def test_the_first_bar_of_each_experiment_tells_its_part(tmp_path: Path) -> None:
    heard: list[Progress] = []
    ctx = _context(tmp_path, heard)
    for name in ctx.progress(["a", "b"], desc="showcase"):  # a showcase's bar over children
        child = ctx.child(name)
        assert list(child.progress(range(4))) == [0, 1, 2, 3]
        inner = child.progress(total=3)  # a second bar of the same experiment: silent
        inner.update(3)
        inner.close()
        ctx.child_done(name)
    parts = [(p.name, p.part) for p in heard if p.part is not None]
    assert {name for name, _ in parts} == {"a", "b"}  # nothing from the showcase's own bar
    for name in "ab":
        mine = [part for n, part in parts if n == name]
        assert mine == sorted(mine) and mine[-1] == 1.0  # onward, to the end
    ended = [p.name for p in heard if p.seconds is not None]
    assert ended == ["a", "b"]


def test_a_plain_experiment_tells_its_part_and_a_run_without_a_command_nothing(
        tmp_path: Path) -> None:
    heard: list[Progress] = []
    (tmp_path / "told").mkdir()
    bar = _context(tmp_path / "told", heard).progress(total=2)
    bar.update(1)
    bar.update(1)
    bar.close()
    assert heard and heard[-1] == Progress("", None, 1.0)
    alone = RunContext(run_dir=tmp_path, seed=0, device=torch.device("cpu"),
                       dtype=torch.float32, disable_patterns=("*",), quiet=True)
    assert not hasattr(alone.progress(total=2), "_told")  # nobody listens: a plain bar


def test_the_command_bar_moves_with_the_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkit.lab.cli import terminal

    monkeypatch.setattr(terminal, "_on_terminal", lambda: True)
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)

    class Showcase:
        def children(self) -> dict[str, None]:
            return {"a": None, "b": None}

    spec = SimpleNamespace(seed=0, params=Showcase(), sweep_point={},
                           experiment=SimpleNamespace(name="showcase"))
    def shown() -> tuple[str, str]:  # the percentage and the count the bar drew last
        follow.bar.refresh()
        return re.findall(r"(\d+)%\|[^|]*\| (\d+)/2 experiments", screen.getvalue())[-1]

    with terminal.Follow([spec], "showcase: 1 run", quiet=False) as follow:
        follow.heard(0, Progress("a", part=0.5))
        assert follow.bar.n == 0.5
        assert shown() == ("25", "0")  # the bar moved; no experiment has ended
        follow.heard(0, Progress("a", 1.5))
        follow.heard(0, Progress("b", part=0.25))
        assert follow.bar.n == 1.25
        assert shown() == ("62", "1")
        follow.ended(0, 1, SimpleNamespace(status="complete", run_dir=Path("r"),
                                           duration_s=2.0, error=None))
        assert follow.bar.n == 2
