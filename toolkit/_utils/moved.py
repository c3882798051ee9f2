"""Module paths that moved before the next release: still importable, with a DeprecationWarning.

The layout changed while version 0.1.0 was being written (the command line, runner and report
went into ``toolkit.lab``, the lens and the audit from ``toolkit.core`` into ``toolkit.lens``).
Code written against an old path keeps working until the next release, which drops them.

``import toolkit.runner`` (or ``from toolkit.data import digits``) gives the module at its new
path, ``toolkit.lab.runner`` (``toolkit.lab.data``), and warns once, naming the new path. The
old name and the new one are the same module object, so state and ``isinstance`` checks agree.
A finder at the front of :data:`sys.meta_path` answers for the old names only; every other
import goes on as before.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install", "new_name"]

#: old module path -> new module path (a package's submodules follow their package)
MOVED: dict[str, str] = {
    "toolkit.core.audit": "toolkit.lens.audit",
    "toolkit.core.audit_graph": "toolkit.lens.audit.findings",
    "toolkit.core.audit_record": "toolkit.lens.audit.record",
    "toolkit.core.audit_state": "toolkit.lens.audit.state",
    "toolkit.lens.audit_graph": "toolkit.lens.audit.findings",
    "toolkit.lens.audit_held": "toolkit.lens.audit.held",
    "toolkit.lens.audit_leaks": "toolkit.lens.audit.leaks",
    "toolkit.lens.audit_names": "toolkit.lens.audit.names",
    "toolkit.lens.audit_notes": "toolkit.lens.audit.notes",
    "toolkit.lens.audit_record": "toolkit.lens.audit.record",
    "toolkit.lens.audit_result": "toolkit.lens.audit.result",
    "toolkit.lens.audit_state": "toolkit.lens.audit.state",
    "toolkit.lens.audit_targets": "toolkit.lens.audit.targets",
    "toolkit.core.backward_graph": "toolkit.lens.backward_graph",
    "toolkit.core.gradients": "toolkit.lens.gradients",
    "toolkit.core.graph_draw": "toolkit.lens.graph_draw",
    "toolkit.core.graph_layout": "toolkit.lens.graph_layout",
    "toolkit.core.graph_walk": "toolkit.lens.graph_walk",
    "toolkit.core.lens": "toolkit.lens.flow",
    "toolkit.cli": "toolkit.lab.cli.app",
    "toolkit.commands": "toolkit.lab.cli.commands",
    "toolkit.commands_read": "toolkit.lab.cli.commands_read",
    "toolkit.data": "toolkit.lab.data",
    "toolkit.divergence": "toolkit.algorithms.divergence",
    "toolkit.measure": "toolkit.lab.measure",
    "toolkit.report": "toolkit.lab.report",
    "toolkit.runner": "toolkit.lab.runner",
    "toolkit.style": "toolkit.lab.style",
}


def new_name(old: str) -> str | None:
    """The new path of module ``old``, or ``None`` when it did not move.

    >>> new_name("toolkit.runner.config")
    'toolkit.lab.runner.config'
    >>> new_name("toolkit.core.stop_gradient") is None
    True
    """
    if old in MOVED:
        return MOVED[old]
    package, _, rest = old.rpartition(".")
    while package:
        if package in MOVED:
            return f"{MOVED[package]}.{old[len(package) + 1:]}"
        package, _, last = package.rpartition(".")
        rest = f"{last}.{rest}"
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new path."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # stacklevel 2: the frame after this one that is not the import system's own
        warnings.warn(f"{self.old} moved to {self.new}; import it from there (the old path "
                      f"goes away in the next release)", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.new)
        self.spec = module.__spec__  # the import system sets the alias's spec on it: undone below
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module at the new path is loaded); its own spec is put back."""
        module.__spec__ = self.spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("toolkit."):
            return None
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, new))


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder at the front of :data:`sys.meta_path` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
