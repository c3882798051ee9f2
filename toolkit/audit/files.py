"""A user's source file as Python reads it, and the only way the audit writes one back.

Reading: the bytes are decoded with the encoding Python itself would use (a UTF-8 byte-order
mark, a ``# -*- coding: … -*-`` line, else UTF-8), with the line endings left as they are, and
the first read of a file is the one every edit is written against (its SHA-256 kept).

Writing (``--apply`` only): a file is written only when it lies inside the script's folder and
is reached there through no link, is not read-only, and holds the very bytes the audit read.
Every file is checked before the first is touched; each write keeps a copy of the old file
(``train.py.orig``, created exclusively: an existing name or a dangling link is never written
through) and lands by an atomic rename; a failure puts back what was written and removes the
copies, so that nothing is left half-written. Text goes back in the file's own encoding and line
endings.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import tempfile
import threading
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Refused", "Source", "escaped", "forget_sources", "inside", "outside", "read_source",
           "write_sources"]

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# characters that would let a name or a message draw on the terminal: C0/C1 controls, bidi and
# other format characters, line and paragraph separators
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def escaped(text: str, keep: str = "") -> str:
    """``text`` with every control or bidi character but those in ``keep`` written as its
    escape (``\\n``, ``\\u202e``): what a path or a script's message may hold can never forge
    a line."""
    def one(m: re.Match) -> str:
        c = m.group()
        if c in keep:
            return c
        return repr(c)[1:-1] if c in "\t\n\r" else f"\\u{ord(c):04x}"
    return _UNSAFE.sub(one, text)


class Refused(Exception):
    """The audit will not write ``path``; ``reason`` says why in a few words."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{escaped(path)}: {reason}")
        self.path, self.reason = path, reason


@dataclass(frozen=True)
class Source:
    """One file as read: its decoded ``text`` (line endings as in the file), the ``encoding``
    Python reads it with (``utf-8-sig`` for a byte-order mark), its first line ending and the
    SHA-256 of its bytes."""

    path: str
    text: str
    encoding: str
    newline: str
    digest: str

    def lines(self) -> list[str]:
        """Its lines as Python's tokenizer counts them (``\\n``, ``\\r\\n`` or ``\\r``; a form
        feed is no line break), each with its ending."""
        return split_lines(self.text)

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def split_lines(text: str) -> list[str]:
    return _LINE.findall(text)


_read: dict[str, Source] = {}
_lock = threading.Lock()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_source(path: str) -> Source:
    """``path`` decoded as Python decodes it. The first read of a file is kept for the life of
    the process: every edit is written against the text the audit saw first, and
    :func:`write_sources` refuses a file whose bytes changed since. Raises ``OSError``,
    ``SyntaxError`` (an unknown coding) or ``UnicodeDecodeError``."""
    key = os.path.abspath(path)
    with _lock:
        known = _read.get(key)
    if known is not None:
        return known
    with open(key, "rb") as fh:
        data = fh.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    ending = re.search(r"\r\n|\r|\n", text)
    source = Source(key, text, encoding, ending.group() if ending else "\n", _digest(data))
    with _lock:
        return _read.setdefault(key, source)


def forget_sources() -> None:
    """Forget every file read: the next audit in this process reads them anew."""
    with _lock:
        _read.clear()


def outside(path: str, root: str) -> bool:
    """Whether ``path`` lies outside the folder ``root`` (by their names, links not followed)."""
    top, here = os.path.abspath(root), os.path.abspath(path)
    return os.path.commonpath([here, top]) != top or here == top


def inside(path: str, root: str) -> str | None:
    """Why ``path`` may not be written as a file of the folder ``root``, or ``None`` when it
    may: it lies inside ``root`` and neither it nor a folder between them is a link."""
    top, here = os.path.abspath(root), os.path.abspath(path)
    if outside(path, root):
        return f"lies outside the script's folder {escaped(top)}"
    rel = os.path.relpath(here, top).split(os.sep)
    walk = top
    for part in rel:
        walk = os.path.join(walk, part)
        if os.path.islink(walk):
            return "is a link" if walk == here else f"is reached through the link {escaped(walk)}"
    return None


def _check(source: Source, root: str) -> bytes:
    why = inside(source.path, root)
    if why is not None:
        raise Refused(source.path, f"{why}; nothing was written")
    try:
        st = os.stat(source.path, follow_symlinks=False)
        with open(source.path, "rb") as fh:
            now = fh.read()
    except OSError as err:
        raise Refused(source.path, f"cannot be read again ({err.strerror}); nothing was "
                                   f"written") from None
    if not stat.S_ISREG(st.st_mode):
        raise Refused(source.path, "is not a regular file; nothing was written")
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or \
            not os.access(source.path, os.W_OK):
        raise Refused(source.path, "is read-only; nothing was written")
    if _digest(now) != source.digest:
        raise Refused(source.path, "changed since the audit read it (the edits' positions "
                                   "would be wrong); nothing was written: audit it again")
    return now


def _copy_name(path: str) -> str:
    copy, n = f"{path}.orig", 0
    while os.path.lexists(copy):
        n += 1
        copy = f"{path}.orig{n}"
    return copy


def _create(path: str, data: bytes, mode: int) -> None:
    """``data`` into a new file ``path``: never an existing name, never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 stat.S_IMODE(mode))
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _replace(path: str, data: bytes, mode: int) -> None:
    """``path`` replaced by ``data`` in one rename (a reader sees the old file or the new)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, stat.S_IMODE(mode))
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def write_sources(new_texts: Mapping[Source, str] | Iterable[tuple[Source, str]],
                  root: str) -> list[tuple[str, str]]:
    """Write each source's new text (in its encoding and line endings), keeping a copy of the
    old file; every file is checked first (see the module's docstring). Returns ``(file,
    copy)`` pairs; raises :class:`Refused` with nothing written."""
    items = list(new_texts.items() if isinstance(new_texts, Mapping) else new_texts)
    olds = [_check(source, root) for source, _ in items]
    done: list[tuple[str, str, bytes, int]] = []
    current = items[0][0].path if items else root
    try:
        for (source, text), old in zip(items, olds):
            current = source.path
            mode = os.stat(source.path).st_mode
            copy = _copy_name(source.path)
            _create(copy, old, mode)
            done.append((source.path, copy, old, mode))
            _replace(source.path, source.encode(text), mode)
    except OSError as err:
        for path, copy, old, mode in reversed(done):
            with contextlib.suppress(OSError):
                with open(path, "rb") as fh:
                    if fh.read() != old:
                        _replace(path, old, mode)
                os.unlink(copy)
        raise Refused(current, f"could not be written ({err.strerror or err}); "
                                   f"nothing was written") from None
    return [(path, copy) for path, copy, _, _ in done]
