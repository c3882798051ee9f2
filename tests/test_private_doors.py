"""No private doors: no module imports another module's underscore name (issue 45, item 4).

STYLE.md: "Names cross files only when public: no underscore name imported from another
module." A name another module needs is public inside its package (and, if it is an internal
helper, kept out of the package's ``__all__``). Counted with ``ast`` over every ``.py`` under
``toolkit/`` and ``experiments/``:

- ``from toolkit.x import _name`` (also ``stop_gradient_experiments.x`` and relative imports such
  as ``from . import _name``); dunder names and ``__future__`` are not private doors;
- ``import toolkit.x._y``, and ``module._name`` where ``module`` is a toolkit or experiment
  module bound by an import.

``_utils`` as a part of a module path is no door: it is the package every layer may use, and
``from toolkit._utils.x import name`` imports a public name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: packages whose modules count (the experiments are installed as ``stop_gradient_experiments``)
_OURS = ("toolkit", "stop_gradient_experiments", "experiments")


def _is_private(name: str) -> bool:
    return (name.startswith("_") and name != "_utils"
            and not (name.startswith("__") and name.endswith("__")))


def _ours(module: str) -> bool:
    return module.split(".")[0] in _OURS


def _module_file(dotted: str, root: Path) -> Path | None:
    """The file of module ``dotted`` under ``root``, if it is one of ours."""
    parts = dotted.split(".")
    if parts[0] not in _OURS:
        return None
    base = root / ("toolkit" if parts[0] == "toolkit" else "experiments") / Path(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _package_of(rel: Path, level: int) -> str:
    """The dotted package a relative import of ``level`` dots in file ``rel`` starts from."""
    parts = ["toolkit" if rel.parts[0] == "toolkit" else "stop_gradient_experiments",
             *rel.with_suffix("").parts[1:]]
    parts.pop()  # a module: its package; ``__init__``: the package itself
    return ".".join(parts[:len(parts) - (level - 1)])


def private_doors(path: Path, root: Path = ROOT) -> list[str]:
    """``"file:line: module -> name"`` for every underscore name the file ``path`` (under
    ``root``) takes from another module of ours."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(root)
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> the module of ours it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(where, node.level)
                module = f"{base}.{node.module}" if node.module else base
            elif node.module and _ours(node.module):
                module = node.module
            else:
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{where}:{node.lineno}: {module} -> {alias.name}")
                elif _module_file(f"{module}.{alias.name}", root) is not None:
                    modules[alias.asname or alias.name] = f"{module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if not _ours(alias.name):
                    continue
                if any(_is_private(part) for part in alias.name.split(".")[1:]):
                    found.append(f"{where}:{node.lineno}: import {alias.name}")
                top = alias.name.split(".")[0]
                modules[alias.asname or top] = alias.name if alias.asname else top
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                owner = ".".join([modules[value.id], *reversed(chain)])
                if _module_file(owner, root) is not None:
                    found.append(f"{where}:{node.lineno}: {owner} -> {node.attr}")
    return found


def _doors(*folders: str) -> list[str]:
    return [door for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))
            for door in private_doors(path)]


def test_no_module_imports_another_modules_underscore_name() -> None:
    doors = _doors("toolkit", "experiments")
    assert not doors, (f"{len(doors)} underscore name(s) imported from another module (make "
                       "each public inside its package, kept out of its __all__, or move it "
                       "to its one user):\n" + "\n".join(doors))


def _write(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_walk_finds_each_kind_of_door_and_nothing_else(tmp_path: Path) -> None:
    for rel in ("toolkit/__init__.py", "toolkit/_utils/__init__.py", "toolkit/_utils/trees.py",
                "toolkit/core/__init__.py", "toolkit/core/stop_gradient.py",
                "toolkit/integrations/__init__.py", "toolkit/integrations/_common.py",
                "experiments/demo/__init__.py"):
        _write(tmp_path, rel)
    probe = _write(tmp_path, "toolkit/integrations/probe.py", (
        "from __future__ import annotations\n"
        "import toolkit.core.stop_gradient as sg\n"
        "import toolkit._utils.trees\n"
        "from toolkit._utils.trees import tree_map\n"
        "from toolkit.core.stop_gradient import _CUT_HOOK, stop_gradient\n"
        "from toolkit import __version__, core\n"
        "from ._common import helper\n"
        "from . import _common\n"
        "import toolkit.integrations._common\n"
        "x = sg._OPEN_HOOK, core.stop_gradient._SEEN, core.BLOCK._private, sg.T.__name__\n"))
    drawing = _write(tmp_path, "experiments/demo/drawing.py", "from . import _LABELS, METHODS\n")
    doors = private_doors(probe, tmp_path)
    assert [door.split(": ", 1)[0] for door in doors] == [  # each door named by file:line
        f"toolkit/integrations/probe.py:{line}" for line in (5, 8, 9, 10, 10)], doors
    names = [door.split(": ", 1)[1] for door in doors]
    assert names == ["toolkit.core.stop_gradient -> _CUT_HOOK",
                     "toolkit.integrations -> _common",
                     "import toolkit.integrations._common",
                     "toolkit.core.stop_gradient -> _OPEN_HOOK",
                     "toolkit.core.stop_gradient -> _SEEN"], names
    assert private_doors(drawing, tmp_path) == [
        "experiments/demo/drawing.py:1: stop_gradient_experiments.demo -> _LABELS"]
