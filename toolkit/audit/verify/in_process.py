"""A fix run before it is printed: the edited step, audited again.

"Proved on the recorded graph" says what the cut does to that graph, not what the edited code
does. So each set of edits the audit would print is written into the functions of the user's
code they lie in (the step's own function, a module's ``forward``, a method or a module-level
function it calls), and the step is audited again from the same state (the audit put the state
back before). Each such function is rebuilt from the edited source, compiled in its class (the
same name mangling, the same ``__class__`` for a zero-argument ``super()``) and installed for
the time of that audit as the code of the live function object: the same globals, closure
cells and defaults, and every reference to the function (a class, a module's globals, a bound
method, a closure) runs the edit; the code is put back in a ``finally``. The edits pass when:

- the findings they fix are gone, and nothing is found that was not found before;
- every tensor a loss's optimizer steps that the findings are not about gets the gradient it
  got before, from the same loss (one real ``autograd.grad``, the same by
  :func:`~toolkit.audit.verify.gradients.same_gradient`), when
  the edited step computes the same loss values (it read the same data); when it does not (a
  data iterator moved on), every such tensor that trained still trains;
- the tensors they are about (a dead tensor, the parameters a trained target reaches) get a
  nonzero gradient: an edit never quiets a finding by taking what it is about out of training.

All the edits are run together first, as the user applies them (a reset and a cut that fix
a carried and a held graph together); when that fails, each set alone. Edits that fail are not
printed; the finding's fix then says so. Edits that cannot be run by calling the step (a line
outside any function, the line of the running code that built an optimizer, a function the
step does not call, such as an ``__init__``) are printed as before, proved on the recorded
graph only; but a registration where a tensor is made and an edit of the line that builds an
optimizer are done on the live objects, the optimizer built again by its line in the names
the step sees (:mod:`toolkit.audit.fixes.registration`), and run so.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import dataclasses
import gc
import linecache
import math
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from toolkit.audit.edit import Edit
from toolkit.audit.fixes.edits import apply_edits, bind_imports, cut_as_seen, skeleton
from toolkit.audit.fixes.registration import running, runs_live
from toolkit.audit.kinds import Proof
from toolkit.audit.verify.gradients import same_gradient

__all__ = ["VERIFYING", "edited_step", "installed", "verified"]

#: set while an edited step is audited: that audit appends its truth here and verifies nothing
VERIFYING: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "toolkit_audit_verifying", default=None)

_FAILURES = ("leaks", "targets", "dead", "carried", "unrolled", "held", "shared")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclasses.dataclass
class _Swap:
    """The edited code of the live functions at one ``def`` (several: a closure made per call)."""

    functions: list[types.FunctionType]
    code: types.CodeType
    imports: dict[str, Any]
    name: str  # the global the edited code appends to when it runs
    # set by the edited code as it runs (an object no audit puts back, as it puts lists back)
    ran: types.SimpleNamespace = dataclasses.field(
        default_factory=lambda: types.SimpleNamespace(ran=False))


def edited_step(step: Any, edits: Iterable[Edit]) -> Callable[[], Any] | None:
    """``step``, called with ``edits`` installed (see :func:`installed`); ``None`` when an edit
    cannot be run by calling it."""
    swaps = _swaps(list(edits))
    if swaps is None:
        return None

    def run() -> Any:
        with installed(swaps):
            return step()

    return run


@contextlib.contextmanager
def installed(swaps: list[_Swap]) -> Iterator[None]:
    """The edited code in its functions (and the names its edits import in their globals) for
    the time of the ``with``; everything put back after, whatever happens."""
    before: list[tuple[types.FunctionType, types.CodeType]] = []
    names: list[tuple[dict[str, Any], str, Any]] = []
    missing = object()
    try:
        for swap in swaps:
            for fn in swap.functions:
                for name, value in {**swap.imports, swap.name: swap.ran}.items():
                    names.append((fn.__globals__, name, fn.__globals__.get(name, missing)))
                    fn.__globals__[name] = value
                before.append((fn, fn.__code__))
                fn.__code__ = swap.code
        yield
    finally:
        for fn, code in reversed(before):
            fn.__code__ = code
        for namespace, name, value in reversed(names):
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value


def _swaps(edits: list[Edit], names: dict[str, Any] | None = None) -> list[_Swap] | None:
    """For each function of the user's code that ``edits`` lie in, its live function objects
    and their edited code (``names``: globals it reads besides the edits' imports); ``None``
    when an edit lies in no function the step can run again."""
    if not edits:
        return None
    running = set()
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:  # the code that called the audit: never run again by the step
        running.add(frame.f_code)
        frame = frame.f_back
    swaps: list[_Swap] = []
    for path in dict.fromkeys(e.path for e in edits):
        mine = [e for e in edits if e.path == path]
        text = "".join(linecache.getlines(path))
        try:
            tree = ast.parse(text)
            edited = ast.parse(apply_edits(text, mine))
        except (SyntaxError, ValueError):
            return None
        live = _functions(path)
        places: dict[tuple[int, ...], list[types.FunctionType]] = {}
        for edit in mine:
            found = _live(tree, edit, live)
            if found is None or any(fn.__code__ in running for fn in found[1]):
                return None
            places[found[0]] = found[1]
        try:
            imports = {**bind_imports(i for e in mine for i in e.imports), **(names or {})}
        except (SyntaxError, ImportError):
            return None
        for place, functions in places.items():
            if any(place[:len(other)] == other != place for other in places):
                continue  # inside another edited function: rebuilt with it
            ran = f"__toolkit_audit_ran_{len(swaps)}__"
            code = _compiled(edited, place, functions[0].__code__, path, ran)
            if code is None:
                return None
            swaps.append(_Swap(functions, code, imports, ran))
    return swaps


def _chain(tree: ast.AST, place: tuple[int, ...]) -> list[ast.AST]:
    """The nodes from ``tree`` down to the one at ``place`` (child indexes among the
    statements of each body)."""
    nodes = [tree]
    for i in place:
        nodes.append(_statements(nodes[-1])[i])
    return nodes


def _statements(node: ast.AST) -> list[ast.stmt]:
    """The statements directly under ``node``, in order (bodies, else-branches, handlers)."""
    out: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, None) or ():
            if isinstance(child, (ast.excepthandler, ast.match_case)):
                out.extend(child.body)
            elif isinstance(child, ast.stmt):
                out.append(child)
    return out


def _live(tree: ast.Module, edit: Edit,
          functions: dict[tuple[str, int], list[types.FunctionType]]
          ) -> tuple[tuple[int, ...], list[types.FunctionType]] | None:
    """The innermost function holding ``edit`` that has live function objects (``functions``:
    those of its file by name and first line): where it is in the tree (see :func:`_chain`) and
    those objects."""
    defs: list[tuple[tuple[int, ...], ast.FunctionDef | ast.AsyncFunctionDef]] = []
    place: tuple[int, ...] = ()
    node: ast.AST = tree
    while (inner := next(((i, child) for i, child in enumerate(_statements(node))
                          if child.lineno <= edit.line <= edit.end_line
                          <= (child.end_lineno or 0)), None)) is not None:
        place, node = (*place, inner[0]), inner[1]
        if isinstance(node, _DEFS):  # a decorator's line is not the function's
            defs.append((place, node))
    for place, node in reversed(defs):
        found = functions.get(
            (node.name, min([node.lineno, *(d.lineno for d in node.decorator_list)])))
        if found:
            return place, found
    return None


def _functions(path: str) -> dict[tuple[str, int], list[types.FunctionType]]:
    """The live functions of file ``path`` by name and first line (a decorator's, if any)."""
    found: dict[tuple[str, int], list[types.FunctionType]] = {}
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and obj.__code__.co_filename == path:
            code = obj.__code__
            found.setdefault((code.co_name, code.co_firstlineno), []).append(obj)
    return found


def _compiled(edited: ast.Module, place: tuple[int, ...], original: types.CodeType,
              path: str, ran: str) -> types.CodeType | None:
    """The code of the function at ``place`` of the edited file, compiled as it runs: inside a
    class of its class's name (name mangling, ``__class__``), with the free variables of
    ``original`` as free variables (``None`` when they differ: the edit reads a new one); its
    first statement sets ``ran.ran`` (``ran``: a global's name)."""
    chain = _chain(edited, place)
    node = chain[-1]
    if not isinstance(node, _DEFS):
        return None
    first = node.body[0]
    mark = ast.Assign([ast.Attribute(ast.Name(ran, ast.Load()), "ran", ast.Store())],
                      ast.Constant(True))
    keep = ast.If(ast.Constant(False), [ast.Expr(ast.Tuple(  # the same cells, used or not
        [ast.Name(n, ast.Load()) for n in original.co_freevars], ast.Load()))], [])
    node.body = [ast.copy_location(mark, first), *node.body, ast.copy_location(keep, first)]
    node.decorator_list = []
    parent = chain[-2]
    body: ast.stmt = (ast.ClassDef(parent.name, [], [], [node], [])
                      if isinstance(parent, ast.ClassDef) else node)
    cells = [ast.Name(n, ast.Store()) for n in original.co_freevars if n != "__class__"]
    outer = ast.FunctionDef("__toolkit_audit_outer__", ast.arguments([], [], None, [], [], None, []),
                            [*([ast.Assign(cells, ast.Constant(None))] if cells else []), body],
                            [], None)
    module = ast.fix_missing_locations(ast.Module([ast.copy_location(outer, node)], []))
    try:
        compiled = compile(module, path, "exec")
    except (SyntaxError, ValueError):
        return None
    todo = list(compiled.co_consts)
    while todo:
        const = todo.pop(0)
        if isinstance(const, types.CodeType):
            if const.co_name == node.name:
                return const if const.co_freevars == original.co_freevars else None
            todo.extend(const.co_consts)
    return None


def _keys(audit: Any) -> set[tuple[Any, ...]]:
    """The failures of an audit, each as a key that names what it is about."""
    return {_key(kind, f) for kind in _FAILURES for f in getattr(audit, kind)}


def _key(kind: str, f: Any) -> tuple[Any, ...]:
    if kind == "leaks":
        return kind, f.loss, f.parameter
    if kind == "targets":
        return kind, f.loss, f.parameters
    if kind == "dead":
        return kind, f.parameter
    if kind == "carried":
        return kind, f.loss, f.source
    if kind == "unrolled":
        return kind, f.loss, f.cut
    if kind == "held":
        return kind, f.module, f.name
    return kind, f.parameters


def _about(kind: str, f: Any) -> set[str] | None:
    """The stepped tensors a finding is about (their gradient may change, and must not vanish);
    ``None``: every gradient may change (a carried or held graph: the cut changes what the
    next call's backward reaches)."""
    if kind == "dead":
        return {f.parameter}
    if kind == "targets":
        return set(f.parameters)
    if kind in ("carried", "unrolled", "held"):
        return None
    return set()


def verified(audit: Any, step: Any, names: Callable[[torch.Tensor], str],
             gradients: dict[str, dict[int, torch.Tensor | None]], losses: dict[str, float],
             stepped: dict[str, dict[int, torch.Tensor]],
             rerun: Callable[[Callable[[], Any]], Any]) -> Any:
    """``audit`` with each set of edits run: those that fail are taken off their findings (see
    the module's docstring). ``gradients``: each loss's real gradients of the tensors its
    optimizer steps, on the audited call, and ``losses`` their values; ``rerun(step)``: the
    audit of ``step`` again with the same optimizers (run under :data:`VERIFYING`, the edits
    installed). A set that fails with a cut written for a tensor (``x.detach()``) is written
    for the values the step held there (:func:`_as_seen`) and run again."""
    check = (step, names, gradients, losses, stepped, rerun)
    failed, passed = _failed(audit, _findings(audit), *check)
    if failed:
        retry = [(kind, f) for kind, f in _findings(audit)
                 if tuple(f.edits) in failed and any(e.cut for e in f.edits)]
        audit, rewritten = _as_seen(audit, retry, step, rerun)
        again, passed_again = _failed(
            audit, [(kind, f) for kind, f in _findings(audit) if id(f) in rewritten], *check)
        failed |= again
        passed |= passed_again
    changed = {}
    for kind in _FAILURES:
        changed[kind] = tuple(
            dataclasses.replace(f, edits=(), fix=f"{f.fix}; the edit this fix implies was run "
                                                 f"and did not pass (not verified): decide at the "
                                                 f"line")
            if f.edits and tuple(f.edits) in failed
            else dataclasses.replace(f, proof=Proof.IN_PROCESS)
            if f.edits and tuple(f.edits) in passed else f for f in getattr(audit, kind))
    return dataclasses.replace(audit, **changed)


def _findings(audit: Any) -> list[tuple[str, Any]]:
    return [(kind, f) for kind in _FAILURES for f in getattr(audit, kind)]


def _failed(audit: Any, findings: list[tuple[str, Any]], step: Any,
            names: Callable[[torch.Tensor], str],
            gradients: dict[str, dict[int, torch.Tensor | None]], losses: dict[str, float],
            stepped: dict[str, dict[int, torch.Tensor]],
            rerun: Callable[[Callable[[], Any]], Any]
            ) -> tuple[set[tuple[Edit, ...]], set[tuple[Edit, ...]]]:
    """The sets of edits of ``findings`` (of ``audit``) that fail, and those that were run and
    passed: all run together first, as the user applies them; when that fails, each set
    alone. A set the step never ran (an ``__init__``'s edit) is in neither."""
    groups: dict[tuple[Edit, ...], list[tuple[str, Any]]] = {}
    for kind, f in findings:
        if f.edits:
            groups.setdefault(tuple(f.edits), []).append((kind, f))
    failed: set[tuple[Edit, ...]] = set()
    passed: set[tuple[Edit, ...]] = set()
    runnable = {edits: swaps for edits in groups  # registrations run on the live objects
                if (swaps := [] if runs_live(edits) else _swaps(list(edits))) is not None}
    every = [e for edits in runnable for e in edits]
    together = _swaps(list(dict.fromkeys(every))) if len(runnable) > 1 else None
    if together is not None and _passes(  # all of them, as the user applies them
            audit, [x for edits in runnable for x in groups[edits]], step, together, names,
            gradients, losses, stepped, rerun):
        return failed, set(runnable)
    for edits, swaps in runnable.items():
        result = _passes(audit, groups[edits], step, swaps, names, gradients, losses, stepped,
                         rerun)
        if result is False:
            failed.add(edits)
        elif result:
            passed.add(edits)
    return failed, passed


#: the global the step's code calls, while the values of its cuts are read, with each value
_SEEN = "__toolkit_audit_seen__"


def _as_seen(audit: Any, findings: list[tuple[str, Any]], step: Any,
             rerun: Callable[[Callable[[], Any]], Any]) -> tuple[Any, set[int]]:
    """``audit`` with the edits of ``findings`` that cut a value not yet seen
    (:attr:`Edit.cut`) written in plain PyTorch for what that value was
    (:func:`~toolkit.audit.fixes.edits.cut_as_seen`): the step is audited once with each such
    expression read as it runs, and cut as the edit means. A finding one of whose edits has no
    plain form for what was read loses its edits (its fix says so); an edit whose expression
    did not run stays as it is. Also the ids of the findings whose edits were written anew."""
    cuts = list(dict.fromkeys(e for _, f in findings for e in f.edits if e.cut))
    if not cuts:
        return audit, set()
    seen: dict[int, list[Any]] = {k: [] for k in range(len(cuts))}

    def read(k: int, value: Any) -> Any:
        seen[k].append(skeleton(value))
        return _detached(value)

    probes = [dataclasses.replace(e, new=f"{_SEEN}({k}, {e.old})", imports=())
              for k, e in enumerate(cuts)]
    swaps = _swaps(probes, {_SEEN: read})
    if swaps is None:  # some lie where the step cannot run them: read the others
        swaps = _swaps([p for p in probes if _swaps([p]) is not None], {_SEEN: read})
    if swaps:
        token = VERIFYING.set([])
        try:
            with installed(swaps):
                rerun(step)
        except Exception:  # what was read before it failed is kept
            pass
        finally:
            VERIFYING.reset(token)
    written = {e: cut_as_seen(e, seen[k]) for k, e in enumerate(cuts)}
    mine = {id(f) for _, f in findings}
    rewritten: set[int] = set()
    changed = {}
    for kind in _FAILURES:
        out = []
        for f in getattr(audit, kind):
            edits = [written.get(e, e) if e.cut else e for e in f.edits]
            if id(f) not in mine or edits == list(f.edits):
                pass
            elif any(e is None for e in edits):
                f = dataclasses.replace(f, edits=(), fix=(
                    f"{f.fix}; no plain PyTorch cut fits every value the step held there "
                    f"(not verified): decide at the line"))
            else:
                f = dataclasses.replace(f, edits=tuple(dict.fromkeys(edits)))
                rewritten.add(id(f))
            out.append(f)
        changed[kind] = tuple(out)
    return dataclasses.replace(audit, **changed), rewritten


def _detached(value: Any) -> Any:
    """``value`` with every tensor it holds in tuples, lists and dicts detached."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if type(value) in (tuple, list):
        return type(value)(_detached(x) for x in value)
    if type(value) is dict:
        return {k: _detached(x) for k, x in value.items()}
    return value


def _passes(audit: Any, findings: list[tuple[str, Any]], step: Any, swaps: list[_Swap],
            names: Callable[[torch.Tensor], str],
            gradients: dict[str, dict[int, torch.Tensor | None]],
            losses: dict[str, float], stepped: dict[str, dict[int, torch.Tensor]],
            rerun: Callable[[Callable[[], Any]], Any]) -> bool | None:
    """Whether the edits pass; ``None`` when the step never ran an edited function (an
    ``__init__``): they cannot be run by calling it."""
    kept: list[Any] = []
    token = VERIFYING.set(kept)
    for swap in swaps:
        swap.ran.ran = False
    try:
        with installed(swaps), running(e for _, f in findings for e in f.edits):
            again = rerun(step)
    except Exception:  # the edited step fails to run: the edit is no fix
        return False
    finally:
        VERIFYING.reset(token)
    if not all(swap.ran.ran for swap in swaps):
        return None
    mine = {_key(kind, f) for kind, f in findings}
    after = _keys(again)
    if after & mine or after - _keys(audit) or not kept:
        return False
    truth = kept[-1]
    # what these findings are about must train; what other findings are about may change
    # with them (one cause, two findings); every other stepped tensor keeps its gradient
    train = set().union(*(_about(kind, f) or set() for kind, f in findings))
    moved = any(_about(kind, f) is None for kind, f in findings)
    free = set().union(*(_about(kind, f) or set() for kind in _FAILURES
                         for f in getattr(audit, kind)))
    # the same loss values: the edited step read the same data (a cut changes no value), so
    # its gradients compare one to one; else (a data iterator moved on) only whether each
    # stepped tensor that trained still trains
    same = set(truth.losses) == set(losses) and all(
        math.isclose(truth.losses[k], v, rel_tol=1e-6, abs_tol=1e-12) for k, v in losses.items())
    # a cut of a leak leaves every stepped gradient as it was; a gradient let through (a dead
    # tensor's straight-through estimator) or a target cut also moves the gradients of what
    # shares its path: those must still train
    same = same and all(kind == "shared" or (kind == "leaks" and f.kind == "cut")
                        for kind, f in findings)
    # what each finding is about must still train: some of its tensors (one may have no
    # gradient in the published step either: a bias whose gradient is a sum that cancels)
    trained: set[str] = set()
    present: set[str] = set()
    for loss, grads in gradients.items():
        for key, before in grads.items():
            after_grad = truth.values.get(loss, {}).get(key, None)
            name = names(stepped[loss][key])
            present.add(name)
            if name in train:
                if _trains(after_grad):
                    trained.add(name)
            elif moved or name in free:
                continue
            elif not (same_gradient(before, after_grad, none_is_zero=False) if same
                      else _trains(after_grad) or not _trains(before)):
                return False
    return all(trained & about for kind, f in findings
               if (about := (_about(kind, f) or set()) & present))


def _trains(grad: torch.Tensor | None) -> bool:
    return grad is not None and bool(grad.ne(0).any())
