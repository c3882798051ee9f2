"""How the user's code stores into a container: the methods that store
(``memory.append(h)``, ``bank.extend(...)``) and the container a statement names
(``self.memory[i]`` -> ``self.memory``)."""

from __future__ import annotations

import ast

__all__ = ["STORES", "container_of"]

#: the methods of a list, a dict, a deque, a set or a queue that store what they are given
STORES = frozenset({"append", "extend", "insert", "appendleft", "extendleft", "add",
                    "update", "setdefault", "push", "put"})


def container_of(node: ast.AST) -> str:
    """The container a target or a receiver names (``self.memory[i]`` -> ``self.memory``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{container_of(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return container_of(node.value)
    return ""
