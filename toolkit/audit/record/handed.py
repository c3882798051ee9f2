"""What the user's code handed a function as one of its parameters: the argument as the caller
wrote it, followed out through each caller that handed on a parameter of its own, so that a
finding about a value a helper received names (and an edit changes) the caller's choice
(``train(epoch, net2, net1, optimizer1)``: ``net1``, ``optimizer1``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from types import CodeType, FrameType

from toolkit.audit.record import syntax as S
from toolkit.audit.record.frames import is_user, site_of

__all__ = ["Handed", "arg_count", "handed_as", "handed_from", "parameter_holding"]


@dataclass(frozen=True)
class Handed:
    """One caller's argument for a parameter: as written, its node in ``path``'s syntax tree
    and the caller's frame (held only while the rule that asked reads it)."""

    spelled: str
    node: ast.expr
    path: str
    frame: FrameType


def arg_count(code: CodeType) -> int:
    """How many of ``code``'s local names are its function's parameters."""
    return code.co_argcount + code.co_kwonlyargcount


def parameter_holding(frame: FrameType, value: object) -> str | None:
    """The name of ``frame``'s function's parameter bound to ``value`` itself, or ``None``."""
    code = frame.f_code
    return next((n for n in code.co_varnames[:arg_count(code)]
                 if frame.f_locals.get(n) is value), None)


def handed_as(frame: FrameType, name: str) -> str | None:
    """What the user's code that called ``frame``'s function passed as its parameter ``name``
    (a plain name or attribute, as written there), followed out through each caller that
    handed on a parameter of its own (``co_guess(net, net2)`` inside ``train(epoch, net,
    net2)``, called as ``train(epoch, net2, net1)``: ``net1``), or ``None``: ``name`` is no
    parameter, the caller is no user code, or it passed something else (a call, an
    expression)."""
    found = handed_from(frame, name)
    return found.spelled if found is not None else None


def handed_from(frame: FrameType, name: str) -> Handed | None:
    """:func:`handed_as` with where the outermost caller wrote it."""
    found = None
    while (handed := _handed_once(frame, name)) is not None:
        found, frame, name = handed, handed.frame, handed.spelled
    return found


def _handed_once(frame: FrameType, name: str) -> Handed | None:
    """:func:`handed_from` one caller out. A library's frames between the two (a decorator's
    wrapper, ``torch.no_grad()``'s) pass the arguments on, where the user's call names the
    function that runs (``co_guess(...)`` for a ``co_guess`` made under
    ``@torch.no_grad()``)."""
    code = frame.f_code
    params = code.co_varnames[:arg_count(code)]
    if name not in params:
        return None
    caller, wrapped = frame.f_back, False
    while caller is not None and not is_user(caller.f_code.co_filename):
        caller, wrapped = caller.f_back, True
    if caller is None:
        return None
    site = site_of(caller)
    found = S.call_at(site.path, site.span)
    if found is None:
        return None
    call, text = found
    called = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(
        call.func, "id", None)
    if wrapped and called != code.co_name:
        return None
    position = params.index(name)
    if isinstance(call.func, ast.Attribute) and params and getattr(
            frame.f_locals.get(params[0]), call.func.attr, None) is not None:
        position -= 1   # a method: its first parameter is the object it is called on
    given = call.func.value if position < 0 else next(
        (k.value for k in call.keywords if k.arg == name), None)
    if given is None and 0 <= position < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        given = call.args[position]
    if not isinstance(given, ast.Name | ast.Attribute):
        return None
    spelled = S.segment(text, given)
    return Handed(spelled, given, site.path, caller) if spelled else None
