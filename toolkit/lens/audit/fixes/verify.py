"""A fix run before it is printed: the edited step, audited again.

"Proved on the recorded graph" says what the cut does to that graph, not what the edited code
does. So each set of edits the audit would print is written into a copy of the user's step
function (the same globals, the closure's values, the same defaults; a bound method bound to
the same object, a ``functools.partial`` with the same arguments), and that step is audited
again from the same state (the audit put the state back before). The edits pass when:

- the findings they fix are gone, and nothing is found that was not found before;
- every tensor a loss's optimizer steps that the findings are not about gets the gradient it
  got before, from the same loss (one real ``autograd.grad``, within ``1e-5`` relative), when
  the edited step computes the same loss values (it read the same data); when it does not (a
  data iterator moved on), every such tensor that trained still trains;
- the tensors they are about (a dead tensor, the parameters a trained target reaches) get a
  nonzero gradient: an edit never quiets a finding by taking what it is about out of training.

All the edits are run together first, as the user applies them (a reset and a cut that fix
a carried and a held graph together); when that fails, each set alone. Edits that fail are not
printed; the finding's fix then says so. Edits outside the step's own
function (a module's ``forward``, the line that builds an optimizer) or a function that cannot
be rebuilt (a ``nonlocal``, a zero-argument ``super()``) are printed as before, proved on the
recorded graph only.
"""

from __future__ import annotations

import ast
import contextvars
import dataclasses
import functools
import linecache
import math
import types
from collections.abc import Callable, Iterable
from typing import Any

import torch

from toolkit.lens.audit.fixes.built import function_of
from toolkit.lens.audit.fixes.edits import Edit, apply_edits

__all__ = ["VERIFYING", "edited_step", "verified"]

#: set while an edited step is audited: that audit appends its truth here and verifies nothing
VERIFYING: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "toolkit_audit_verifying", default=None)

_FAILURES = ("leaks", "targets", "dead", "carried", "held", "shared")


def edited_step(step: Any, edits: Iterable[Edit]) -> Callable[[], Any] | None:
    """``step`` with ``edits`` written into a copy of its function, or ``None`` when an edit
    lies outside that function or the function cannot be rebuilt alone."""
    fn = function_of(step)
    code = getattr(fn, "__code__", None)
    edits = list(edits)
    if code is None or not edits or "__class__" in code.co_freevars:
        return None
    path = code.co_filename
    text = "".join(linecache.getlines(path))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    node = _function_at(tree, code)
    if node is None:
        return None
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    if any(e.path != path or e.line < first or e.end_line > node.end_lineno  # type: ignore[operator]
           for e in edits):
        return None
    try:
        edited = _function_at(ast.parse(apply_edits(text, edits)), code)
    except (SyntaxError, ValueError):
        return None
    if edited is None:
        return None
    edited.decorator_list = []
    namespace = dict(fn.__globals__)
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:  # an empty cell
            return None
    try:
        for statement in dict.fromkeys(i for e in edits for i in e.imports):
            exec(compile(statement, path, "exec"), namespace)  # an import the edit names
        exec(compile(ast.Module(body=[edited], type_ignores=[]), path, "exec"), namespace)
    except (SyntaxError, ImportError):
        return None
    new = namespace[code.co_name]
    new.__defaults__, new.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    return _rewrap(step, new)


def _function_at(tree: ast.AST, code: types.CodeType) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == \
                code.co_name and node.body and min(
                    [node.lineno, *(d.lineno for d in node.decorator_list)]) \
                <= code.co_firstlineno <= node.body[0].lineno:
            return node  # type: ignore[return-value]
    return None


def _rewrap(step: Any, fn: Callable[..., Any]) -> Callable[[], Any]:
    if isinstance(step, functools.partial):
        return functools.partial(_rewrap(step.func, fn), *step.args, **step.keywords)
    if hasattr(step, "__func__") and hasattr(step, "__self__"):
        return types.MethodType(_rewrap(step.__func__, fn), step.__self__)
    return fn


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
    if kind in ("carried", "held"):
        return None
    return set()


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-5, atol=1e-8))


def verified(audit: Any, step: Any, names: Callable[[torch.Tensor], str],
             gradients: dict[str, dict[int, torch.Tensor | None]], losses: dict[str, float],
             stepped: dict[str, dict[int, torch.Tensor]],
             rerun: Callable[[Callable[[], Any]], Any]) -> Any:
    """``audit`` with each set of edits run: those that fail are taken off their findings (see
    the module's docstring). ``gradients``: each loss's real gradients of the tensors its
    optimizer steps, on the audited call, and ``losses`` their values; ``rerun(step)``: the audit of another step with the
    same optimizers (run under :data:`VERIFYING`)."""
    groups: dict[tuple[Edit, ...], list[tuple[str, Any]]] = {}
    for kind in _FAILURES:
        for f in getattr(audit, kind):
            if f.edits:
                groups.setdefault(tuple(f.edits), []).append((kind, f))
    failed: set[tuple[Edit, ...]] = set()
    runnable = {edits: new for edits, findings in groups.items()
                if (new := edited_step(step, edits)) is not None}  # else: proved on the graph
    every = tuple(dict.fromkeys(e for edits in runnable for e in edits))
    together = edited_step(step, every) if len(runnable) > 1 else None
    if together is not None and _passes(  # all of them, as the user applies them
            audit, [x for edits in runnable for x in groups[edits]], together, names,
            gradients, losses, stepped, rerun):
        return audit
    for edits, new in runnable.items():
        if not _passes(audit, groups[edits], new, names, gradients, losses, stepped, rerun):
            failed.add(edits)
    if not failed:
        return audit
    changed = {}
    for kind in _FAILURES:
        changed[kind] = tuple(
            dataclasses.replace(f, edits=(), fix=f"{f.fix}; the edit this fix implies was run "
                                                 f"and did not pass (not verified): decide at the "
                                                 f"line")
            if tuple(f.edits) in failed else f for f in getattr(audit, kind))
    return dataclasses.replace(audit, **changed)


def _passes(audit: Any, findings: list[tuple[str, Any]], new: Callable[[], Any],
            names: Callable[[torch.Tensor], str],
            gradients: dict[str, dict[int, torch.Tensor | None]],
            losses: dict[str, float], stepped: dict[str, dict[int, torch.Tensor]],
            rerun: Callable[[Callable[[], Any]], Any]) -> bool:
    kept: list[Any] = []
    token = VERIFYING.set(kept)
    try:
        again = rerun(new)
    except Exception:  # the edited step fails to run: the edit is no fix
        return False
    finally:
        VERIFYING.reset(token)
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
    for loss, grads in gradients.items():
        for key, before in grads.items():
            after_grad = truth.values.get(loss, {}).get(key, None)
            name = names(stepped[loss][key])
            if name in train:
                if not _trains(after_grad):
                    return False  # what the finding is about must train
            elif moved or name in free:
                continue
            elif not (_same(before, after_grad) if same
                      else _trains(after_grad) or not _trains(before)):
                return False
    return True


def _trains(grad: torch.Tensor | None) -> bool:
    return grad is not None and bool(grad.ne(0).any())
