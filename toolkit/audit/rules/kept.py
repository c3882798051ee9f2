"""Graph kept between calls where no module holds it: a list, a dict, a global, a closure
cell or a plain object the step refers to.

``history.append(loss)`` (``loss.item()`` meant), a replay buffer that keeps samples with
their graph (``buffer.extend(fake)``, ``fake.detach()`` meant), ``total = total + loss``: the
next call reads none of it, yet every call's graph, with every tensor it saved for backward,
stays alive, and memory grows from call to call (PyTorch FAQ, "My model reports 'cuda
runtime error(2): out of memory'": "Don't accumulate history across your training loop",
https://pytorch.org/docs/stable/notes/faq.html).

The rule follows provenance, not a list of places: after the second call it looks at every
tensor with a graph that the step can reach through its closure, the globals its code reads,
its bound ``self`` and ``functools.partial`` arguments, and the items and attributes of the
lists, tuples, dicts, deques and plain objects found there (not the state of modules: see
:mod:`~toolkit.audit.rules.held`). A place is a finding when it keeps graph of *both*
calls (made by the first call and still alive after the second, and made by the second): the
graph kept grows with every call. A place that the second call's loss reads is left to
:mod:`~toolkit.audit.rules.carried`; one that keeps only the last call's graph (``last =
loss``) keeps one step's graph, not a growing one: no finding.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import dataclasses
import functools
import inspect
import os
import sys
import textwrap
import types
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from toolkit.audit.findings import HeldGraph
from toolkit.audit.idiom import toolkit_only
from toolkit.audit.kinds import HeldKind
from toolkit.audit.record.sites import Line
from toolkit.audit.record.stores import STORES, container_of
from toolkit.audit.rules.saved import holds_saved, saved_bytes
from toolkit.lens.backward_graph import is_cut_marker

if TYPE_CHECKING:
    from toolkit.audit.truth.recorded import Found, RecordedStep

__all__ = ["KeptState", "check", "find_kept", "stores_reaching"]

_MAX_OBJECTS = 2000  # containers and objects looked at
_MAX_ITEMS = 100_000  # items of one container looked at (a replay buffer)



def _library(obj: Any) -> bool:
    """Whether ``obj`` (a function or a class) is an installed library's or Python's own,
    not the user's: what it keeps is no step's state."""
    name = getattr(obj, "__module__", None) or ""
    root = name.split(".")[0]
    if root in ("torch", "numpy", "toolkit") or root in sys.stdlib_module_names:
        return True
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path


def _children(obj: Any) -> Iterator[tuple[str, Any]]:
    """``(suffix of the path, value)`` for what ``obj`` holds."""
    if isinstance(obj, functools.partial):
        yield "", obj.func
        yield from ((f"[{i}]", a) for i, a in enumerate(obj.args))
        yield from ((f".{k}", v) for k, v in obj.keywords.items())
    elif isinstance(obj, types.MethodType):
        yield "", obj.__self__
        yield "", obj.__func__
    elif isinstance(obj, types.FunctionType):
        code = obj.__code__
        for name, cell in zip(code.co_freevars, obj.__closure__ or ()):
            with contextlib.suppress(ValueError):  # an empty cell
                yield name, cell.cell_contents
        for name in code.co_names:
            if name in obj.__globals__:
                yield name, obj.__globals__[name]
    elif isinstance(obj, Mapping):
        for i, (k, v) in enumerate(obj.items()):
            if i >= _MAX_ITEMS:
                break
            yield f"[{k!r}]", v
    elif isinstance(obj, (list, tuple, collections.deque)):
        for i, v in enumerate(obj):
            if i >= _MAX_ITEMS:
                break
            yield f"[{i}]", v
    elif isinstance(obj, nn.Module):
        # a module's tensors are the held rule's; what it keeps in lists and dicts is ours
        for k, v in vars(obj).items():
            if not k.startswith("_") and isinstance(v, (list, tuple, dict,
                                                        collections.deque)):
                yield f".{k}", v
    elif hasattr(obj, "__dict__") and not _library(type(obj)):
        yield from ((f".{k}", v) for k, v in vars(obj).items())


@dataclasses.dataclass(frozen=True)
class _Place:
    """Where a tensor is kept: ``root`` (the name the step reads), ``path``
    (``self.losses[3]``), ``holder`` (the type of what holds it: ``list``), ``owner`` and
    ``attribute``: the object whose attribute holds the container and its name (``None`` and
    the root for a global or a closure variable)."""

    root: str
    path: str
    holder: str
    owner: Any
    attribute: str


def _kept(step: Any) -> list[tuple[_Place, torch.Tensor]]:
    """``(where, tensor)`` for every tensor with a graph the step can reach through what it
    refers to (see the module's docstring), breadth first."""
    queue: collections.deque[tuple[_Place, Any, int]] = collections.deque(
        (_Place(root, root, "", None, root), value, 1) for root, value in _children(step) if root)
    if isinstance(step, types.MethodType):  # a bound method: self's attributes by name
        queue.extendleft((_Place("self" + k, "self" + k, "", step.__self__, k[1:]), v, 1)
                         for k, v in _children(step.__self__))
    seen: set[int] = {id(step)}
    found = []
    visits = 0
    while queue and visits < _MAX_OBJECTS:
        place, obj, depth = queue.popleft()
        if isinstance(obj, torch.Tensor):
            if obj.grad_fn is not None and not isinstance(obj, nn.Parameter):
                found.append((place, obj))
            continue
        if id(obj) in seen or depth > 5 or isinstance(
                obj, (types.ModuleType, type, str, bytes, int, float, bool, type(None))):
            continue
        seen.add(id(obj))
        visits += 1
        if isinstance(obj, types.FunctionType) and _library(obj):
            continue
        for suffix, value in _children(obj):
            if not suffix or suffix[0] not in "[.":  # a function's own names start anew
                queue.append((_Place(place.root, suffix, "", None, suffix), value, depth + 1))
            elif suffix[0] == ".":
                queue.append((_Place(place.root, place.path + suffix, type(obj).__name__, obj,
                                     suffix[1:]), value, depth + 1))
            else:
                queue.append((dataclasses.replace(place, path=place.path + suffix,
                                                  holder=type(obj).__name__), value, depth + 1))
    return found


class KeptState:
    """The state a step keeps outside modules, saved before the audit's calls and put back
    after: the items of every list, dict and deque it reaches (see :func:`_kept`), its
    closure cells, and the graph of the tensors it keeps. The step then runs again as it first ran (an edited step is audited from
    the same memory, not from the graphs the two calls left there)."""

    def __init__(self, step: Any) -> None:
        self.items: list[tuple[Any, Any]] = []
        self.cells: list[tuple[Any, Any]] = []
        self.plain: list[torch.Tensor] = []  # tensors with no graph, which a write may give one
        queue: collections.deque[tuple[Any, int]] = collections.deque([(step, 0)])
        seen: set[int] = set()
        while queue and len(seen) < _MAX_OBJECTS:
            obj, depth = queue.popleft()
            if isinstance(obj, torch.Tensor) and id(obj) not in seen:
                seen.add(id(obj))
                if obj.grad_fn is None and not obj.requires_grad:
                    self.plain.append(obj)
                continue
            if id(obj) in seen or depth > 5 or isinstance(
                    obj, (torch.Tensor, types.ModuleType, type, str, bytes, int, float, bool,
                          type(None))):
                continue
            seen.add(id(obj))
            if isinstance(obj, types.FunctionType):
                if _library(obj):
                    continue
                for cell in obj.__closure__ or ():
                    with contextlib.suppress(ValueError):  # an empty cell
                        self.cells.append((cell, cell.cell_contents))
            if type(obj) in (list, dict, collections.deque):
                self.items.append((obj, dict(obj) if isinstance(obj, dict) else list(obj)))
            queue.extend((value, depth + 1) for _, value in _children(obj))

    def restore(self) -> None:
        """Put every item and cell back (the same objects); a kept tensor that took a graph
        from an in-place write (``buffer[i] = x``) is detached again (its values stay as the
        calls wrote them)."""
        for t in self.plain:
            if t.grad_fn is not None:
                with contextlib.suppress(RuntimeError):  # a view: cannot be detached in place
                    t.detach_()
        for cell, value in self.cells:
            if cell.cell_contents is not value:
                cell.cell_contents = value
        for obj, saved in self.items:
            if isinstance(obj, dict):
                if obj.keys() != saved.keys() or any(obj[k] is not v for k, v in saved.items()):
                    obj.clear()
                    obj.update(saved)
            elif len(obj) != len(saved) or any(a is not b for a, b in zip(obj, saved)):
                obj.clear()
                obj.extend(saved)


def find_kept(step: RecordedStep) -> list[HeldGraph]:
    """The places outside modules that keep the graph of both calls (see the module's
    docstring), one finding per place."""
    rec = step.rec
    if step.step is None or len(rec.marks) < 2 or rec.threads:
        return []
    first_mark, this_mark = rec.marks[0], rec.marks[-1]
    read = {key for search in step.searches.values() for key in search.nodes}
    places: dict[str, list[tuple[_Place, torch.Tensor]]] = {}
    for place, t in _kept(step.step):
        places.setdefault(place.root, []).append((place, t))
    out = []
    for root, items in places.items():
        nodes = _behind([t.grad_fn for _, t in items])
        made = {key: n._sequence_nr() for key, n in nodes.items()
                if getattr(n, "variable", None) is None}
        first = [key for key, nr in made.items() if first_mark <= nr < this_mark]
        second = [key for key, nr in made.items() if nr >= this_mark]
        if not first or not second or any(key in read for key in first) or not any(
                getattr(n, "variable", None) is not None or holds_saved(n)
                for n in nodes.values()):
            continue  # one call's graph, or read by the loss (the carried rule's)
        seen: set[int] = set()
        size = sum(saved_bytes(nodes[key], seen) for key in second)
        place, tensor = items[-1]
        lines = _store_lines(step.step, place)
        made_at = rec.made.get(id(tensor.grad_fn))
        if not lines and made_at is not None and made_at[0] is tensor.grad_fn:
            lines = list(made_at[1][:1])
        where = f" at {lines[0].file}:{lines[0].number}" if lines else ""
        container = place.path.split("[", 1)[0]
        fix = (f"keep it without its graph where the step stores it in {container}{where}: "
               f".detach() (or .item() for a number)"
               f"{toolkit_only(', or stop_gradient(x, name=...)')}; if "
               f"this call's loss reads it back with its graph, cut it where it is read "
               f"instead (not verified by running the edited step)")
        out.append(HeldGraph(
            module=root, name=place.path[len(root):], kind=HeldKind.KEPT,
            kept_in=_kind(step.step, place),
            shape=tuple(tensor.shape),
            written=(f"{len(items)} tensor{'s' if len(items) != 1 else ''} with a graph "
                     f"kept there, made by both calls"),
            graph_bytes=size, n_nodes=len(second), older=len(first), fix=fix,
            lines=tuple(lines)))
    return out


def _behind(starts: list[Any]) -> dict[int, Any]:
    """Every node the graph behind ``starts`` holds, by ``id``, cuts respected."""
    found: dict[int, Any] = {}
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node is None or id(node) in found or is_cut_marker(node):
            continue
        found[id(node)] = node
        stack.extend(child for child, _ in node.next_functions)
    return found


def _function(step: Any) -> Any:
    fn = step
    while isinstance(fn, (functools.partial, types.MethodType)):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__func__
    return fn


def _kind(step: Any, place: _Place) -> str:
    """What keeps the place (``"an item of a list kept in a global"``)."""
    code = getattr(_function(step), "__code__", None)
    scope = ("a closure variable" if code is not None and place.root in code.co_freevars
             else "self" if place.root.startswith("self.") else "a global")
    if not place.holder:
        return f"a tensor kept in {scope}"
    what = "an item" if place.holder in ("list", "tuple", "dict", "deque") else "an attribute"
    return f"{what} of a {place.holder} kept in {scope}"


def _store_lines(step: Any, place: _Place) -> list[Line]:
    """The lines that store into the container of ``place``: in the step's own code under
    the name it reads (``buffer.append(...)``, ``total = total + ...``), else in the class of
    the object whose attribute it is (``self.memory.append(h)`` in a module's forward); read
    from the source, none when it cannot be read."""
    container = place.path.split("[", 1)[0]
    fn = _function(step)
    found = _stores_in(fn, container)
    if not found and place.owner is not None:
        for cls in type(place.owner).__mro__:
            if _library(cls):
                break
            found = _stores_in(cls, f"self.{place.attribute}")
            if found:
                break
    return found


def _stores_in(obj: Any, name: str) -> list[Line]:
    """The lines of ``obj``'s source (a function or a class) that store into ``name``."""
    try:
        source = textwrap.dedent(inspect.getsource(obj))
        tree = ast.parse(source)
        path = inspect.getsourcefile(obj) or ""
        _, first = inspect.getsourcelines(obj)
    except (OSError, TypeError, SyntaxError):
        return []
    lines = source.splitlines()
    found: dict[int, Line] = {}
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            hit = node.func.attr in STORES and container_of(node.func.value) == name
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            hit = any(container_of(t) == name for t in targets)
        if hit and isinstance(node, ast.Assign) and _empty(node.value):
            hit = False  # the container made empty (``self.memory = []``): no store
        if hit:
            number = node.lineno
            owner = next((f.name for f in ast.walk(tree)
                          if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                          and f.lineno <= number <= (f.end_lineno or f.lineno)), "")
            found.setdefault(number, Line(os.path.basename(path), number + first - 1, owner,
                                          lines[number - 1].strip(), path))
    return [found[k] for k in sorted(found)]


def stores_reaching(step: Any, node: Any, mark: int) -> list[tuple[Line, str, Any]]:
    """Where the step stores, outside modules (a list, a dict, a global, a closure cell), the
    state through which this call reads the old graph ``node``: for each place whose tensor is
    ``node``'s or reaches it through this call's graph (nodes numbered from ``mark``), each
    line that stores into it, as ``(line, container, key)``: the container as the source
    writes it (``memory``, ``self.bank``) and the item's key when it is known (``None``:
    any). the fixes stage cuts what those lines store."""
    found: list[tuple[Line, str, Any]] = []
    for place, tensor in _kept(step):
        if _reaches(tensor.grad_fn, node, mark):
            container = place.path.split("[", 1)[0]
            key = _key(place.path[len(container):])
            found += [(line, container, key) for line in _store_lines(step, place)]
    return found


def _reaches(start: Any, node: Any, mark: int) -> bool:
    """Whether the graph from ``start`` reaches ``node`` through nodes numbered from
    ``mark`` (this call's), cuts respected."""
    seen: set[int] = set()
    stack = [start]
    while stack:
        n = stack.pop()
        if n is node:
            return True
        if n is None or id(n) in seen or is_cut_marker(n) or n._sequence_nr() < mark:
            continue
        seen.add(id(n))
        stack.extend(child for child, _ in n.next_functions)
    return False


def _key(path: str) -> Any:
    """The key of the first item a place's path names after its container (``['h'][0]``
    -> ``'h'``); ``None`` when it names none or cannot be read."""
    if not path.startswith("["):
        return None
    try:
        return ast.literal_eval(path[1:path.index("]")])
    except (ValueError, SyntaxError):
        return None


def _empty(value: ast.expr) -> bool:
    """Whether ``value`` makes an empty container (``[]``, ``{}``, ``deque(maxlen=...)``)."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return not value.elts
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.Call) and not value.args and (
        getattr(value.func, "id", None) or getattr(value.func, "attr", "")) in (
        "list", "dict", "deque", "set", "OrderedDict", "defaultdict")


def check(step: RecordedStep) -> Found:
    """The rule: graph of both calls kept outside modules."""
    return {"held": find_kept(step)}
