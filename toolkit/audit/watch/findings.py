"""What a watched script is found to do: one typed finding per kind, each with the user's lines
and, where one exists, the edit that fixes it, and how that edit was proved."""

from __future__ import annotations

from dataclasses import dataclass, field

from toolkit.audit.kinds import SCRIPT_KINDS, Kind, Proof, coerce
from toolkit.audit.watch.edits import ScriptEdit
from toolkit.audit.watch.source import read_source

__all__ = ["KINDS", "ScriptFinding", "old_text"]

#: kind -> whether it is a failure (it changes what the script trains) or information: the
#: script audit's kinds, as :class:`~toolkit.audit.kinds.Kind` defines them
KINDS: dict[str, bool] = {str(k): k.failure for k in Kind if k in SCRIPT_KINDS}


@dataclass
class ScriptFinding:
    """One finding: ``kind`` (a :class:`~toolkit.audit.kinds.Kind` of
    :data:`~toolkit.audit.kinds.SCRIPT_KINDS`; a string is coerced to it), the iteration it
    first appeared in (0-based), a one-line message, the tensors it is about (stable keys
    ``opt<i>.<group>.<index>``, or a module name for tensors no optimizer steps) and their
    names, the user's lines, the edits that fix it, and whether those edits were verified by
    running the edited script (``verified``; ``proof`` says it as a
    :class:`~toolkit.audit.kinds.Proof`)."""

    kind: Kind
    iteration: int
    message: str
    tensors: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    at: tuple[str, ...] = ()
    edits: tuple[ScriptEdit, ...] = ()
    advice: str = ""
    step: int = -1                      # the optimizer step event it was found at
    concerned: tuple[str, ...] = ()     # tensors whose gradient the fix may change
    verified: bool | None = None
    why_not: str = ""
    cost_bytes: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kind = coerce(Kind, self.kind, "ScriptFinding.kind", SCRIPT_KINDS)

    @property
    def failure(self) -> bool:
        return Kind(self.kind).failure

    @property
    def proof(self) -> Proof:
        """``RERUN`` when the edits were verified by rerunning the script on copies from the
        same seed; otherwise ``ADVICE`` (no edit, an edit whose rerun did not pass, or one not
        run: ``--no-verify``, or not yet). ``--apply`` writes only edits whose proof is safe."""
        return Proof.RERUN if self.verified and self.edits else Proof.ADVICE

    @property
    def key(self) -> tuple:
        return (self.kind, self.at, self.tensors)

    def to_dict(self) -> dict:
        """The finding as ``report.json`` holds it (:class:`toolkit.audit.schema.Finding`)."""
        return {"kind": str(self.kind), "failure": self.failure, "proof": str(self.proof),
                "verified": self.verified, "why_not": self.why_not,
                "iteration": self.iteration, "step": self.step, "message": self.message,
                "tensors": list(self.tensors), "names": list(self.names), "at": list(self.at),
                "advice": self.advice,
                "edits": [{**e.to_dict(), "old": old_text(e)} for e in self.edits]}

    def lines(self) -> list[str]:
        """The finding as the report prints it: each edit with how it was proved."""
        head = "FAIL" if self.failure else "info"
        out = [f"{head:<7} {self.kind}: {self.message} (iteration {self.iteration})"]
        if self.names:
            shown = ", ".join(self.names[:6]) + (f", … ({len(self.names)} in all)"
                                                  if len(self.names) > 6 else "")
            out.append(f"        tensors: {shown}")
        out += [f"        at:   {a}" for a in self.at]
        if self.proof.safe:
            out += [f"        edit: {e}" for e in self.edits]
            out.append("        verified: the edited script, rerun from the same seed, no longer "
                       "shows it and keeps every other gradient")
            out.append(f"        proof: {self.proof.text} (--apply writes it)")
        else:
            if self.advice:
                out.append(f"        fix:  {self.advice}")
            if self.edits and self.verified is False:
                out.append(f"        not verified: {self.why_not}")
                out.append(f"        proof: {self.proof.text} (--apply does not write it)")
            elif self.failure and not self.edits:
                out.append("        not verified: no edit could be written for it")
        return out


def old_text(edit: ScriptEdit) -> str | None:
    """The text ``edit`` replaces, from the file as the audit read it (columns in UTF-8 bytes,
    lines as Python's, as :func:`~toolkit.audit.watch.edits.apply_to_text` counts them);
    ``None`` when the file cannot be read."""
    try:
        source = read_source(edit.path)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    lines = source.lines()

    def offset(pos: tuple[int, int]) -> int:
        line, col = pos
        if line - 1 >= len(lines):
            return sum(len(x) for x in lines)
        before = sum(len(x) for x in lines[:line - 1])
        return before + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))

    return source.text[offset(edit.start):offset(edit.end)]
