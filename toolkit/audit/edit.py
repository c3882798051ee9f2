"""One change of a user's file, as both audits print and write it: :class:`Edit`.

The fixes (:mod:`toolkit.audit.fixes.edits`) write edits of the expression a finding names;
the findings (:mod:`toolkit.audit.findings`) carry them; :func:`~toolkit.audit.apply_edits`
and ``toolkit audit --apply`` write them into a source text or a file.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

__all__ = ["Edit", "flat"]


@dataclass(frozen=True)
class Edit:
    """Replace the expression ``old`` of file ``file`` by ``new``.

    ``line``, ``col``, ``end_line``, ``end_col``: where ``old`` is (lines from 1, columns in
    UTF-8 bytes from 0, as :mod:`ast` counts them); ``path``: the file's full path;
    ``imports``: what ``new`` needs imported; ``cut``: see below. ``str()`` is ``"train.py:42: fake ->
    fake.detach()"`` (whitespace of a multi-line expression shown as one space).
    """

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    old: str
    new: str
    path: str = field(default="", compare=False, repr=False)
    imports: tuple[str, ...] = ()
    #: ``new`` cuts the value of ``old`` written for a tensor (``old.detach()``) before the
    #: value was seen: :func:`~toolkit.audit.fixes.edits.cut_as_seen` writes it for what the step held there
    cut: bool = field(default=False, compare=False, repr=False)

    @property
    def start(self) -> tuple[int, int]:
        """Where ``old`` starts: ``(line, column)``."""
        return self.line, self.col

    @property
    def end(self) -> tuple[int, int]:
        """Where ``old`` ends: ``(line, column)``; ``end == start`` for an insertion."""
        return self.end_line, self.end_col

    def to_dict(self) -> dict:
        """The edit as ``report.json`` holds it (:class:`toolkit.audit.schema.Edit`)."""
        return {"path": self.file, "start": list(self.start), "end": list(self.end),
                "old": self.old, "new": self.new, "what": str(self)}

    def __str__(self) -> str:
        if not self.old:  # a line inserted before line ``line``
            return f"{self.file}:{self.line}: insert before it: {flat(self.new)}"
        if not self.new.strip():  # a statement taken out, its lines left blank
            return f"{self.file}:{self.line}: remove: {flat(self.old)}"
        if flat(self.old) == flat(self.new):  # the same lines, indented otherwise
            where = "out of its block" if _indent(self.new) < _indent(self.old) else \
                "into the block above"
            return f"{self.file}:{self.line}: moved {where}: {flat(self.old)}"
        return f"{self.file}:{self.line}: {flat(self.old)} -> {flat(self.new)}"


def _indent(text: str) -> int:
    """The width of ``text``'s first line's indentation."""
    return len(text) - len(text.lstrip(" \t"))


def flat(text: str) -> str:
    """``text`` on one line, without its comments."""
    if "#" in text:
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(f"({text})").readline))
        except (tokenize.TokenError, SyntaxError):
            tokens = []
        if tokens:
            kept = [t for t in tokens if t.type != tokenize.COMMENT]
            text = tokenize.untokenize(kept)[1:].rstrip()[:-1]
    return re.sub(r"\s*\n\s*", " ", text).strip()
