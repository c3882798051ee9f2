"""What a watched script is found to do: one typed finding per kind, each with the user's lines
and, where one exists, the edit that fixes it."""

from __future__ import annotations

from dataclasses import dataclass, field

from toolkit.audit.watch.edits import ScriptEdit

__all__ = ["KINDS", "ScriptFinding"]

# kind -> whether it is a failure (it changes what the script trains) or information
KINDS = {
    "leak": True,        # another loss's gradient in .grad when this optimizer steps
    "stale": True,       # an earlier iteration's gradient (no zero_grad) in .grad at a step
    "cleared": True,     # the step's own gradient cleared before the step used it
    "dead": True,        # a stepped tensor no loss reached since the last step
    "carried": True,     # the graph reaches graph made by the previous iteration
    "unstepped": True,   # gradient reaches tensors of a trained model that no optimizer steps
    "shared": True,      # a tensor two optimizers step
    "frozen": True,      # held by an optimizer, requires_grad switched off mid-run
    "aliased": True,
    "target": True,      # a comparison's target side carries gradient to stepped tensors     # a target (read under no_grad) that is the trained network itself
    "wasted": False,     # gradient written and cleared before any step used it
    "hand_updated": False,  # stepped, no gradient, moved by the script (an EMA copy)
}


@dataclass
class ScriptFinding:
    """One finding: ``kind`` (see :data:`KINDS`), the iteration it first appeared in (0-based),
    a one-line message, the tensors it is about (stable keys ``opt<i>.<group>.<index>``, or a
    module name for tensors no optimizer steps) and their names, the user's lines, the edits
    that fix it, and whether those edits were verified by running the edited script."""

    kind: str
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

    @property
    def failure(self) -> bool:
        return KINDS[self.kind]

    @property
    def key(self) -> tuple:
        return (self.kind, self.at, self.tensors)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "iteration": self.iteration, "message": self.message,
                "tensors": list(self.tensors), "at": list(self.at), "failure": self.failure,
                "verified": self.verified, "step": self.step,
                "edits": [e.to_dict() for e in self.edits]}

    def lines(self) -> list[str]:
        """The finding as the report prints it."""
        head = "FAIL" if self.failure else "info"
        out = [f"{head:<7} {self.kind}: {self.message} (iteration {self.iteration})"]
        if self.names:
            shown = ", ".join(self.names[:6]) + (f", … ({len(self.names)} in all)"
                                                  if len(self.names) > 6 else "")
            out.append(f"        tensors: {shown}")
        out += [f"        at:   {a}" for a in self.at]
        if self.verified:
            out += [f"        edit: {e}" for e in self.edits]
            out.append("        verified: the edited script, rerun from the same seed, no longer "
                       "shows it and keeps every other gradient")
        else:
            if self.advice:
                out.append(f"        fix:  {self.advice}")
            if self.edits and self.verified is False:
                out.append(f"        not verified: {self.why_not}")
            elif self.failure and not self.edits:
                out.append("        not verified: no edit could be written for it")
        return out
