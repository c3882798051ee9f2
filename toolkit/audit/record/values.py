"""The value an expression of the user's code holds, read from the syntax tree without running it.

An edit must know which operand of a line holds a tensor (``loss(q, target)``: is it ``q``?),
or that ``self.optimizer``'s name in the step reads the optimizer the audit was given. Such an
expression is *readable* when it names a value and calls nothing: a name, an attribute of one, an
item with a constant key (``self.avg``, ``state["hidden"]``, ``model.layers[0]``), a constant,
or ``a if flag else b`` of them. :func:`read_value` follows it through the objects themselves:
names from the namespaces given, attributes from an object's own ``__dict__`` (and a module's
parameters, buffers and submodules), items of dicts, lists, tuples and torch's module and
parameter containers. Nothing is evaluated: no property, ``__getattr__`` or ``__getitem__`` of
the user's runs, and a value that could only be read by running one is a :class:`LookupError`.
"""

from __future__ import annotations

import ast
import inspect
import types
from collections.abc import Mapping

from torch import nn

__all__ = ["plain", "read_value", "readable"]

_MISSING = object()
_TESTS = (bool, int, float, str, type(None))  # what ``a if flag else b`` may test


def plain(node: ast.expr) -> bool:
    """A name, an attribute of one, or an item with a constant key (``self.avg``,
    ``state["hidden"]``)."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return plain(node.value)
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and plain(node.value)
    return False


def readable(node: ast.expr) -> bool:
    """A :func:`plain` expression, a constant, or ``a if flag else b`` of them."""
    if isinstance(node, ast.IfExp):
        return all(readable(n) for n in (node.test, node.body, node.orelse))
    return isinstance(node, ast.Constant) or plain(node)


def read_value(expression: ast.expr | str, path: str, *namespaces: Mapping[str, object]
               ) -> object:
    """The value of a :func:`readable` expression (a node, or source text read as ``path``'s)
    where a name is looked up in ``namespaces`` in turn; :class:`LookupError` when it cannot
    be read there without running code."""
    node = ast.parse(expression, filename=path, mode="eval").body \
        if isinstance(expression, str) else expression
    if not readable(node):
        raise LookupError(expression)
    return _read(node, namespaces)


def _read(node: ast.expr, namespaces: tuple[Mapping[str, object], ...]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        for namespace in namespaces:
            if node.id in namespace:
                return namespace[node.id]
        raise LookupError(node.id)
    if isinstance(node, ast.Attribute):
        return _attribute(_read(node.value, namespaces), node.attr)
    if isinstance(node, ast.Subscript):
        return _item(_read(node.value, namespaces), node.slice.value)  # type: ignore[attr-defined]
    if isinstance(node, ast.IfExp):
        test = _read(node.test, namespaces)
        if not isinstance(test, _TESTS):
            raise LookupError(ast.unparse(node.test))
        return _read(node.body if test else node.orelse, namespaces)
    raise LookupError(ast.unparse(node))


def _attribute(obj: object, name: str) -> object:
    """``obj.name`` when it is stored, not computed: in the object's own ``__dict__`` (a
    module's too), a class attribute that is no descriptor, or an ``nn.Module``'s parameter,
    buffer or submodule."""
    try:
        own: Mapping[str, object] | None = vars(obj)
    except TypeError:  # no __dict__ (slots, builtins)
        own = None
    found = inspect.getattr_static(obj, name, _MISSING)
    if found is not _MISSING:
        stored = own is not None and own.get(name, _MISSING) is found
        if stored or isinstance(obj, types.ModuleType) or not hasattr(type(found), "__get__"):
            return found
        raise LookupError(name)  # a property, a method: reading it would run code
    if isinstance(obj, nn.Module) and own is not None:
        for store in ("_parameters", "_buffers", "_modules"):
            held = own.get(store)
            if isinstance(held, dict) and name in held:
                return held[name]
    raise LookupError(name)


def _item(obj: object, key: object) -> object:
    """``obj[key]`` for a dict, list or tuple (their own item lookup, never a subclass's) and
    torch's module and parameter containers."""
    if isinstance(obj, (nn.ModuleDict, nn.ParameterDict)):
        held = vars(obj)["_modules" if isinstance(obj, nn.ModuleDict) else "_parameters"]
        if key in held:
            return held[key]
    elif isinstance(obj, (nn.ModuleList, nn.Sequential, nn.ParameterList)):
        held = vars(obj)["_parameters" if isinstance(obj, nn.ParameterList) else "_modules"]
        values = list(held.values())
        if isinstance(key, int) and -len(values) <= key < len(values):
            return values[key]
    elif isinstance(obj, dict):
        if dict.__contains__(obj, key):
            return dict.__getitem__(obj, key)
    elif isinstance(obj, (list, tuple)) and isinstance(key, int):
        kind = list if isinstance(obj, list) else tuple
        if -kind.__len__(obj) <= key < kind.__len__(obj):
            return kind.__getitem__(obj, key)
    raise LookupError(key)
