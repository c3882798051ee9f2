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


def test_the_fixes_stage_gives_the_running_rules_every_edit_their_port_names() -> None:
    """The running rules ask for edits through ``FixWriter`` (a port of the rules stage); the
    driver hands them ``toolkit.audit.fixes.running``: it has each of the port's functions,
    with the port's parameters, and nothing the port does not name."""
    import inspect

    from toolkit.audit.fixes import running
    from toolkit.audit.rules.running.fix_writer import FixWriter

    port = {name for name, value in vars(FixWriter).items()
            if inspect.isfunction(value) and not name.startswith("_")}
    assert port == set(running.__all__)
    for name in port:
        wanted = list(inspect.signature(getattr(FixWriter, name)).parameters)[1:]
        assert list(inspect.signature(getattr(running, name)).parameters) == wanted, name
