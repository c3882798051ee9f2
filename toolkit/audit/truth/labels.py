"""Readable names for backward-graph nodes: ``Addmm (q_target.2)``, ``block 'dqn.target'
(disabled)``, ``the output of generator (shape (4, 2))``."""

from __future__ import annotations

from typing import Any

from toolkit.audit.record.recording import Recording, is_open_marker
from toolkit.lens.backward_graph import is_cut_marker, node_label

__all__ = ["SELECTIONS", "VIEWS", "Labeller", "node_shape", "outputs_of", "owners", "shape_text"]

VIEWS = frozenset({"T", "Transpose", "View", "Reshape", "Permute", "Expand", "Unsqueeze",
                    "Squeeze", "ToCopy", "Alias"})
#: what only selects from a tensor or rearranges it (``targets[mask]``, a slice, a view)
SELECTIONS = frozenset({"Index", "Select", "Slice", "MaskedSelect"}) | VIEWS


class Labeller:
    """Readable node names: ``Addmm (q_target.2)``, ``block 'dqn.target' (disabled)``, …"""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec

    def module_of(self, node: Any, outer: bool = False) -> str | None:
        entry = self.rec.outputs.get(id(node))
        if entry is not None and entry[0] is node:
            return entry[2] if outer else entry[1]
        return None

    def _consumes(self, node: Any) -> str | None:
        """The module of a named parameter that ``node`` reads directly (or through a view)."""
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            if node_label(nxt) in VIEWS:
                found = self._consumes(nxt)
                if found:
                    return found
            variable = getattr(nxt, "variable", None)
            name = None if variable is None else self.rec.names.tensors.get(id(variable))
            if name and "." in name:
                return name.rsplit(".", 1)[0]
        return None

    def __call__(self, node: Any) -> str:
        if is_open_marker(node):
            return f"block {node.block!r} (disabled)"
        variable = getattr(node, "variable", None)
        if variable is not None:
            return self.rec.names.name(variable)
        label = node_label(node)
        module = self.module_of(node) or (None if is_cut_marker(node) else self._consumes(node))
        return f"{label} ({module})" if module else label

    def tensor(self, node: Any, consumer: Any | None) -> tuple[str, tuple[int, ...] | None]:
        """``("the output of q_target", shape)`` for the tensor ``node`` gives ``consumer``."""
        shape = None
        entry = self.rec.outputs.get(id(node))
        if entry is not None and entry[0] is node:
            return f"the output of {entry[2]}{entry[4]}", entry[3]
        if consumer is not None:
            for nxt, nr in consumer.next_functions:
                if nxt is node:
                    shape = node_shape(node, nr)
                    break
        return f"the output of {self(node)}", shape


def node_shape(node: Any, nr: int) -> tuple[int, ...] | None:
    try:
        return tuple(node._input_metadata[nr].shape)
    except (AttributeError, IndexError, RuntimeError):  # private API: optional
        return None






def outputs_of(node: Any) -> list[Any]:
    """The output metadata of ``node`` (one entry per output), or ``[]`` when unknown."""
    try:
        return list(node._input_metadata)
    except (AttributeError, RuntimeError):  # private API: optional
        return []


def owners(names: list[str]) -> str:
    """The modules that hold ``names``: their longest common dotted prefix, else the tops."""
    parts = [n.split(".")[:-1] for n in names]
    common = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        common.append(level[0])
    if common:
        return ".".join(_unparametrized(common))
    tops = list(dict.fromkeys(p[0] if p else n for p, n in zip(parts, names)))
    return ", ".join(tops[:3]) + (", …" if len(tops) > 3 else "")


def _unparametrized(parts: list[str]) -> list[str]:
    """``D.0.parametrizations.weight`` -> ``D.0``: the layer, not its parametrization."""
    return parts[:parts.index("parametrizations")] if "parametrizations" in parts else parts


def shape_text(shape: tuple[int, ...] | None) -> str:
    """`` (shape (4, 2))`` after a tensor's name in a finding, or nothing when unknown."""
    return "" if shape is None else f" (shape {tuple(shape)})"
