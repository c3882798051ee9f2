"""The user's own frames: which frame of the stack is the script's code, and the exact span of
the call it is paused in (Python 3.11's ``co_positions``), so that an edit replaces the very
expression the user wrote."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass
from types import FrameType

import torch

from toolkit.audit.record.sites import INSTALLED, STDLIB, TOOLKIT

__all__ = ["Site", "is_user", "site_of", "user_file_lines", "user_frame"]

# torch's folder, the whole toolkit's, Python's own modules and the installed packages': their
# frames are never the user's
_NOT_USER = tuple(dict.fromkeys(
    [os.path.dirname(torch.__file__) + os.sep, os.path.join(TOOLKIT, ""), *STDLIB]
    + [os.path.join(os.path.realpath(sysconfig.get_paths()[key]), "")
       for key in ("purelib", "platlib")]))
_user_files: dict[str, bool] = {}
_positions: dict[object, list] = {}


def is_user(filename: str) -> bool:
    """Whether ``filename`` is the user's code (not torch, the toolkit, the standard library or
    an installed package)."""
    known = _user_files.get(filename)
    if known is None:
        real = os.path.realpath(filename)
        known = not (filename.startswith("<") or real.startswith(_NOT_USER)
                     or any(part in real for part in INSTALLED))
        _user_files[filename] = known
    return known


def user_frame(depth: int = 1) -> FrameType | None:
    """The innermost frame of the user's code above the caller's, or ``None``."""
    frame: FrameType | None = sys._getframe(depth + 1)
    while frame is not None and not is_user(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_file_lines(frame: FrameType | None) -> list[tuple[str, int]]:
    """The user's frames from ``frame`` outwards, as ``(file, line)``."""
    out = []
    while frame is not None:
        if is_user(frame.f_code.co_filename):
            out.append((os.path.abspath(frame.f_code.co_filename), frame.f_lineno))
        frame = frame.f_back
    return out


def scope_lines(frame: FrameType | None) -> tuple[tuple[str, int, int], ...]:
    """The user's frames from ``frame`` outwards, each as ``(file, the first line of its
    function, the line it runs)``: where a statement at one scope (a module's top level, a
    function) made what a call inside it did (``net.add_task()``, whose method appends a
    head)."""
    out = []
    while frame is not None:
        code = frame.f_code
        if is_user(code.co_filename):
            out.append((os.path.abspath(code.co_filename), code.co_firstlineno, frame.f_lineno))
        frame = frame.f_back
    return tuple(out)


@dataclass(frozen=True)
class Site:
    """A place in the user's code: the file, the line, and the span (lines and columns, 0-based
    columns) of the call the frame was paused in, when Python knows it."""

    path: str
    line: int
    span: tuple[int, int, int, int] | None

    def text(self) -> str:
        return linecache.getline(self.path, self.line).strip()

    def __str__(self) -> str:
        return f"{os.path.basename(self.path)}:{self.line}"

    def shown(self) -> str:
        """``train.py:42: loss.backward()``, as pytest names a line."""
        return f"{self}: {self.text()}"


def site_of(frame: FrameType) -> Site:
    """The :class:`Site` a frame is paused at."""
    code, span = frame.f_code, None
    positions = _positions.get(code)
    if positions is None:
        positions = _positions[code] = list(code.co_positions())
    try:
        pos = positions[frame.f_lasti // 2]
        if None not in pos:
            span = (pos[0], pos[1], pos[2], pos[3])  # type: ignore[assignment]
    except (IndexError, ValueError):
        span = None
    return Site(os.path.abspath(code.co_filename), frame.f_lineno, span)
