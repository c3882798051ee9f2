"""The audit's stages import one way: record -> truth -> rules -> fixes -> verify.

A stage may import the stages before it and the findings model (``kinds``, ``edit``,
``findings``, ``result``, ``schema``), never a stage after it; the model imports only the
model and the record (a finding names the user's :class:`~toolkit.audit.record.sites.Line`).
A rule says where its fixes go; the fixes stage, after it, writes them.
"""

from __future__ import annotations

import ast
from pathlib import Path

AUDIT = Path(__file__).resolve().parents[2] / "toolkit" / "audit"
STAGES = ("record", "truth", "rules", "fixes", "verify")
MODEL = ("kinds", "edit", "findings", "result", "schema")


def _audit_imports(path: Path) -> set[str]:
    """The audit's modules ``path`` imports, as their first name below ``toolkit.audit``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        found.update(n.split(".")[2] for n in names if n.startswith("toolkit.audit."))
    return found


def _place(path: Path) -> str:
    rel = path.relative_to(AUDIT).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _arrows() -> set[tuple[str, str, str]]:
    return {(_place(p), p.stem, dst) for p in AUDIT.rglob("*.py")
            for dst in _audit_imports(p) if dst != _place(p)}


def test_no_stage_imports_a_later_stage() -> None:
    back = {(src, module, dst) for src, module, dst in _arrows()
            if src in STAGES and dst in STAGES and STAGES.index(dst) > STAGES.index(src)}
    assert back == set()


def test_the_findings_model_imports_only_the_model_and_the_record() -> None:
    wrong = {(src, module, dst) for src, module, dst in _arrows()
             if src in MODEL and dst not in (*MODEL, "record")}
    assert wrong == set()


def test_the_layout_holds_each_stage() -> None:
    assert {p.name for p in AUDIT.iterdir() if (p / "__init__.py").exists()} >= set(STAGES)
