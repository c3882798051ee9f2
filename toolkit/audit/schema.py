"""The shape of ``report.json``, the record ``toolkit audit --record DIR`` writes: one pydantic
model that writes the file and reads it back, so that what is written is validated and a damaged
file is one :class:`pydantic.ValidationError` naming the field.

>>> from toolkit.audit.schema import VERSION, Report
>>> VERSION, sorted(Report.model_json_schema()["required"])[:4]
(1, ['args', 'audited', 'backwards', 'command'])

The page ``docs/reference/audit_record.md`` documents every field; :data:`VERSION` changes when
a field changes meaning or goes away (a new optional field keeps it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolkit.audit.kinds import SCRIPT_KINDS, Kind, Proof

__all__ = ["VERSION", "Edit", "Finding", "Options", "Report", "load_report"]

#: the version of the schema that :class:`Report` writes and reads
VERSION = 1

_Count = Annotated[int, Field(ge=0)]
_Position = tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=0)]]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Edit(_Record):
    """One edit of the user's code: replace ``old`` from ``start`` to ``end`` of ``path`` by
    ``new``."""

    #: the file's name (not its folder: a record does not depend on the machine)
    path: str
    #: where the replaced text starts: line (1-based) and column (0-based, in UTF-8 bytes)
    start: _Position
    #: where it ends, the same way (``end == start``: an insertion)
    end: _Position
    #: the text replaced, as the audit read it; ``None`` when the file could not be read
    old: str | None
    #: what is written instead
    new: str
    #: the edit in words (``train.py:42: fake -> fake.detach()``)
    what: str


class Finding(_Record):
    """One finding of the script audit."""

    #: what it is (one of :data:`~toolkit.audit.kinds.SCRIPT_KINDS`)
    kind: Kind
    #: whether it is a failure (it changes what the script trains), else information; always
    #: the kind's own (:attr:`Kind.failure`)
    failure: bool
    #: how its edits were proved: ``rerun`` (verified by rerunning the script) or ``advice``
    proof: Proof
    #: whether the edits passed the rerun; ``None`` when they were not run (``--no-verify``)
    verified: bool | None
    #: why the rerun did not verify them, when it did not
    why_not: str = ""
    #: the iteration (0-based) in which it first appeared
    iteration: _Count
    #: the optimizer step (0-based, over all of the script's steps) it was found at; -1: none
    step: Annotated[int, Field(ge=-1)]
    #: the finding in one line
    message: str
    #: the tensors it is about: stable keys (``opt<i>.<group>.<index>``, or a module's name)
    tensors: list[str]
    #: their names in the script's modules, where known
    names: list[str] = []
    #: the values a cut makes, by the names the script binds them to (``logits``, where a
    #: network's call under ``no_grad`` cuts its tensors off), for a finding about a cut
    values: list[str] = []
    #: the user's lines it is about (``train.py:42: loss.backward()``)
    at: list[str]
    #: the fix in words, when no edit is verified
    advice: str = ""
    #: the edits that fix it
    edits: list[Edit]

    @field_validator("kind")
    @classmethod
    def _a_script_kind(cls, kind: Kind) -> Kind:
        if kind not in SCRIPT_KINDS:
            raise ValueError(f"{kind.value!r} is a kind of the step audit, not of a script; "
                             f"expected one of {', '.join(sorted(SCRIPT_KINDS))}")
        return kind

    @model_validator(mode="after")
    def _consistent(self) -> Finding:
        if self.failure != self.kind.failure:
            raise ValueError(f"failure is {self.failure} but a {self.kind.value!r} finding is "
                             f"{'a failure' if self.kind.failure else 'information'}")
        if self.proof not in (Proof.RERUN, Proof.ADVICE):
            raise ValueError(f"proof {self.proof.value!r}: a script's edits are proved by "
                             f"rerunning it ('rerun') or not at all ('advice')")
        if (self.proof is Proof.RERUN) != bool(self.verified and self.edits):
            raise ValueError(f"proof {self.proof.value!r} with verified={self.verified} and "
                             f"{len(self.edits)} edits: 'rerun' means edits that passed the rerun")
        return self


class Options(_Record):
    """The audit's own options, as given (see ``toolkit audit --help``)."""

    #: ``--steps``: the first iterations of each loop audited
    steps: Annotated[int, Field(ge=1)]
    #: ``--follow``: iterations run past the last audited one, looking for a later loop
    follow: _Count
    #: ``--watch``: every how many iterations the whole run is audited; ``None``: not watched
    watch: Annotated[int, Field(ge=1)] | None
    #: ``--seed``: the seed of torch, numpy and random before the script starts
    seed: int
    #: whether edits were verified by rerunning the script (``--no-verify`` turns it off)
    verify: bool
    #: ``--apply``: the verified edits written into the script's folder
    apply: bool
    #: ``--diff``: the edits printed as a diff
    diff: bool


class Report(_Record):
    """``report.json``: what one ``toolkit audit`` run of a script found and what it did not
    check."""

    #: the schema's version (:data:`VERSION`); required, so that a file of another is refused
    version: Literal[1]
    #: the arguments ``toolkit audit`` was given: its own options, the script, the script's
    command: list[str]
    #: the script's file name
    script: str
    #: the script's own arguments
    args: list[str]
    #: the audit's options
    options: Options
    #: the iterations the script ran (an iteration ends at a ``backward()`` that follows a step)
    iterations: _Count
    #: the iterations (0-based) that were audited
    audited: list[_Count]
    #: the ``backward()`` calls the script made
    backwards: _Count
    #: the optimizer steps the script made
    steps: _Count
    #: whether the audit stopped the script after its audited iterations
    stopped: bool
    #: the script's own exit status (``sys.exit``), when it ended on its own
    exit_code: int | None
    #: the exception that ended the script (``ValueError: ...``), if one did
    error: str | None
    #: what the audit could not judge, in words (never empty when it judged nothing)
    not_checked: list[str]
    #: every finding, failures and information
    findings: list[Finding]
    #: the audit's exit status: 0 clean, 1 a failure found (or the script failed), 2 not
    #: audited (or the command was wrong), else the script's own exit status
    status: int

    @model_validator(mode="after")
    def _says_what_it_did_not_check(self) -> Report:
        if not self.audited and not self.not_checked:
            raise ValueError("no iteration was audited, and not_checked does not say so")
        return self

    def to_json(self) -> str:
        """The report as ``report.json`` holds it."""
        return json.dumps(self.model_dump(mode="json"), indent=1)


def load_report(path: str | Path) -> Report:
    """``report.json`` (a path to it or to the folder ``--record`` wrote) read and validated;
    raises :class:`pydantic.ValidationError` naming each field that does not fit."""
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    return Report.model_validate_json(path.read_text(encoding="utf-8"))
