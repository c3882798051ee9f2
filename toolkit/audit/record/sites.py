"""Lines of the user's code: where the step made a tensor, handed it to a module, cut it.

The recording asks :func:`user_line` at the moment something happens (a module returns, a
step-level operation makes a tensor, a ``detach`` runs); it walks the Python stack from the
innermost frame out and returns the first frame of the user's own code, as pytest shows a
failing line: the file, the line number, the function and the text of the line.

Frames of torch, of the toolkit and of Python's standard library (``copy.deepcopy``,
``functools``) are never the user's code. Frames of other installed
packages (``site-packages``: peft, transformers, nflows) are skipped too when the step's own
code lies further out, so that a fix is written where the user can write it; with
``installed=True`` they count (a buffer written inside an installed module's forward is fixed
there).
"""

from __future__ import annotations

import functools
import itertools
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType

import torch
from torch import nn

__all__ = ["INSTALLED", "OWN_PATHS", "STDLIB", "STOP_CODES", "TOOLKIT", "Line", "caller_frame",
           "cut_by_user", "forget_lines", "grad_off_block", "grad_off_line", "line_of", "step_line",
           "user_frame", "user_frames", "user_line", "user_lines", "user_stack"]

# frames of these folders are never user code: torch, the lens and the audit (of the toolkit's
# folder); nor those of installed packages, or of Python's own modules
TOOLKIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the lens's and the audit's own files: calls they make are not the script's
OWN_PATHS = (os.path.join(TOOLKIT, "lens", ""), os.path.join(TOOLKIT, "audit", ""))
_LIBRARY_PATHS = (os.path.dirname(torch.__file__) + os.sep, *OWN_PATHS)
INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# Python's own modules (copy.py, functools.py); installed packages may live below this folder
STDLIB = tuple(dict.fromkeys(os.path.join(os.path.realpath(sysconfig.get_paths()[key]), "")
                              for key in ("stdlib", "platstdlib")))


@dataclass(frozen=True)
class Line:
    """One line of the user's code: ``str()`` is ``"train.py:42: output = netD(fake)"``.

    ``file``: the file's name (its base name: the line is found by name and number);
    ``path``: its full path; ``number``: the line number; ``function``: the function it is in;
    ``text``: the line, stripped (empty when the source cannot be read); ``inside``: the
    module class whose ``forward`` runs this line (directly or through functions it calls),
    ``""`` for the step's own code: a line inside a forward runs for every caller.
    ``span``: where in the source the expression running there is, as Python counts it for
    tracebacks (``(line, end line, column, end column)``, columns in UTF-8 bytes), or ``None``;
    two lines are equal whatever their spans (a line is where a fix goes, the span what
    it edits: :mod:`toolkit.audit.fixes.edits`).
    """

    file: str
    number: int
    function: str
    text: str
    path: str = ""
    inside: str = ""
    span: tuple[int, int, int, int] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.number}: {self.text}" if self.text else \
            f"{self.file}:{self.number} (in {self.function})"


# (id of a code object, instruction offset, line number, enclosing module class) -> (the code
# object, the Line a frame running there shows): a module's hooks ask for the same lines at
# every call, and reading a line's text and span each time costs more than the step's own
# operations on a small model; emptied by :func:`forget_lines` (the recording, on entry and exit)
_LINES: dict[tuple[int, int, int, str], tuple[CodeType, Line]] = {}


def forget_lines() -> None:
    """Forget the lines read so far (each audit reads its files' lines afresh)."""
    _LINES.clear()


def _line(frame: FrameType, inside: str | None = None) -> Line:
    """The :class:`Line` ``frame`` runs; ``inside``: the module class whose ``forward`` runs
    it, when the caller knows it (found from ``frame`` outward otherwise)."""
    code, number = frame.f_code, frame.f_lineno
    inside = _inside(frame) if inside is None else inside
    key = (id(code), frame.f_lasti, number, inside)
    found = _LINES.get(key)
    if found is None or found[0] is not code:
        path = code.co_filename
        found = _LINES[key] = (code, Line(os.path.basename(path), number, code.co_name,
                                          linecache.getline(path, number).strip(), path,
                                          inside, _span(frame)))
    return found[1]


def _span(frame: FrameType) -> tuple[int, int, int, int] | None:
    """``(line, end line, column, end column)`` of the instruction ``frame`` runs (the call
    or operation under way there), or ``None`` when Python does not know it."""
    try:
        found = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None))
    except (StopIteration, AttributeError):
        return None
    return None if None in found else found  # type: ignore[return-value]


@functools.cache
def _library(path: str) -> bool:
    """Whether a frame of file ``path`` is torch's, the toolkit's or Python's own (the standard
    library, frozen modules)."""
    return (path.startswith(_LIBRARY_PATHS) or path.startswith("<frozen")
            or (path.startswith(STDLIB) and not _installed(path)))


def called_by_user() -> bool:
    """Whether the torch call the audit is dispatching was made by the user's own code (a line
    of a ``forward`` the user wrote), not by torch's (an ``nn.Linear``'s own ``forward``) or an
    installed package's: the first frame above the audit's own is the user's."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(OWN_PATHS):
        frame = frame.f_back
    if frame is None:
        return False
    path = frame.f_code.co_filename
    return not _library(path) and not _installed(path)


@functools.cache
def _installed(path: str) -> bool:
    """Whether file ``path`` belongs to an installed package (peft, transformers, nflows)."""
    return any(part in path for part in INSTALLED)


def package_of(path: str) -> str:
    """The installed package a file belongs to (``higher`` for ``…/site-packages/higher/
    utils.py``), or ``""``."""
    parts = path.split(os.sep)
    at = [i for i, part in enumerate(parts) if part in ("site-packages", "dist-packages")]
    return parts[at[-1] + 1].removesuffix(".py") if at and at[-1] + 1 < len(parts) else ""


def _forward_of(frame: FrameType) -> nn.Module | None:
    """The module whose ``forward`` ``frame`` runs (``m(x)`` or ``m.forward(x)``), if any."""
    code = frame.f_code
    if code.co_name != "forward" or not code.co_argcount:
        return None
    owner = frame.f_locals.get(code.co_varnames[0])
    return owner if isinstance(owner, nn.Module) else None


def _inside(frame: FrameType | None) -> str:
    """The class of the innermost ``nn.Module`` whose ``forward`` is running at or outside
    ``frame``, or ``""``."""
    while frame is not None:
        owner = _forward_of(frame)
        if owner is not None:
            return type(owner).__name__
        frame = frame.f_back
    return ""


def caller_frame(depth: int = 2) -> FrameType | None:
    """The innermost frame outside torch, the toolkit and the standard library above the
    caller (``depth`` frames up): the user's code that called into the toolkit."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and _library(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def step_line() -> Line | None:
    """The innermost line of the user's code that runs outside every module's ``forward``
    (the step's own line that called the forward now running), or ``None``."""
    return next((line for line in user_stack(3) if not line.inside), None)


def step_frame(depth: int = 2) -> FrameType | None:
    """The innermost frame of the user's code that runs outside every module's ``forward``
    (the step's own code that handed a tensor to the forward now running), or ``None``."""
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and id(frame.f_code) not in STOP_CODES:
        frames.append(frame)
        frame = frame.f_back
    # frames inside the outermost running forward are inside one; the user's first frame
    # outside it is the step's own code
    outer = max((i for i, f in enumerate(frames) if _forward_of(f) is not None), default=-1)
    return next((f for f in frames[outer + 1:] if not _library(f.f_code.co_filename)
                 and not _installed(f.f_code.co_filename)), None)


def user_frame(depth: int = 2) -> FrameType | None:
    """The innermost frame of the user's code above the caller (``depth`` frames up), outside
    installed packages when there is one, or ``None``."""
    frame: FrameType | None = sys._getframe(depth)
    fallback = None
    while frame is not None:
        path = frame.f_code.co_filename
        if not _library(path):
            if not _installed(path):
                return frame
            fallback = fallback or frame
        frame = frame.f_back
    return fallback


def user_frames(depth: int = 2) -> Iterator[FrameType]:
    """The frames of the user's code above the caller (``depth`` frames up), innermost first:
    outside torch, the toolkit, the standard library and installed packages."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        path = frame.f_code.co_filename
        if not _library(path) and not _installed(path):
            yield frame
        frame = frame.f_back


def line_of(frame: FrameType) -> Line:
    """The line ``frame`` runs, as a :class:`Line` (with its span)."""
    return _line(frame)


def user_lines(depth: int = 2) -> tuple[Line | None, Line | None]:
    """``(user_line(depth), user_line(depth, installed=True))``, from one walk up the stack."""
    frame: FrameType | None = sys._getframe(depth)
    inner = None
    while frame is not None:
        path = frame.f_code.co_filename
        if not _library(path):
            inner = inner or frame
            if not _installed(path):
                return _line(frame), _line(inner)
        frame = frame.f_back
    line = None if inner is None else _line(inner)
    return line, line


def user_line(depth: int = 2, *, installed: bool = False) -> Line | None:
    """The innermost frame of the user's code above the caller (``depth`` frames up), or
    ``None`` when the stack holds none (a step written inside torch or the toolkit)."""
    frame: FrameType | None = sys._getframe(depth)
    fallback = None
    while frame is not None:
        path = frame.f_code.co_filename
        if not _library(path):
            if installed or not _installed(path):
                return _line(frame)
            fallback = fallback or frame
        frame = frame.f_back
    return None if fallback is None else _line(fallback)


#: library calls whose argument decides which tensors get a gradient:
#: ``(package, function) -> ((argument, what the wrong value does, the value that trains), …)``;
#: a value of ``None`` means the argument must hold the tensor read (a tuple of tensors)
LIBRARY_ARGUMENTS: dict[tuple[str, str], tuple[tuple[str, str, object], ...]] = {
    ("torchdiffeq", "odeint_adjoint"): ((
        "adjoint_params", "its adjoint passes gradient only to the tensors adjoint_params "
        "holds (tuple(func.parameters()) when it is not given)", None),),
    ("higher", "innerloop_ctx"): ((
        "copy_initial_weights", "the patched model starts from copies of the parameters "
        "(copy_initial_weights=True is its default), new leaves that pass the outer loss's "
        "gradient no further", False), (
        "track_higher_grads", "each step of the differentiable optimizer detaches the weights "
        "it makes (not first-order MAML: no gradient reaches the initial weights at all)",
        True)),
}


@dataclass(frozen=True)
class LibraryCall:
    """The user's line that called an installed library's ``function`` with ``argument``
    missing a tensor it reads, or set to a value that passes it no gradient (see
    :data:`LIBRARY_ARGUMENTS`); ``value``: the value that trains it (``None``: the argument
    must hold the tensor)."""

    package: str
    function: str
    argument: str
    why: str
    value: object
    given: object  # the argument's value in that call
    line: Line
    #: an expression of the user's code at ``line`` that reads as the tensor (a local or
    #: global name, or an attribute of one: ``func.A``), or ``""``
    expression: str = ""


def library_call(tensor: torch.Tensor, depth: int = 2, *, flags_only: bool = False
                 ) -> LibraryCall | None:
    """The outermost call on the stack (``depth`` frames up) of a function listed in
    :data:`LIBRARY_ARGUMENTS`, made from an installed package, whose argument (as the
    function holds it now: ``odeint_adjoint`` fills ``adjoint_params`` with
    ``func.parameters()`` when it is not given) does not hold ``tensor``, or is not the value
    that trains it (``copy_initial_weights=False``), with the line of the user's code that
    called it; or ``None``. ``flags_only``: only arguments with a value that trains (a
    tensor detached there is not the one the argument holds)."""
    frame: FrameType | None = sys._getframe(depth)
    found = None
    while frame is not None:
        path = frame.f_code.co_filename
        if _installed(path):
            key = (package_of(path), frame.f_code.co_name)
            spec = next((spec for spec in LIBRARY_ARGUMENTS.get(key, ())
                         if (spec[2] is not None or not flags_only)
                         and _wrong(frame.f_locals.get(spec[0]), spec[2], tensor)), None)
            if spec is not None:
                caller = frame.f_back
                while caller is not None and (_library(caller.f_code.co_filename)
                                              or _installed(caller.f_code.co_filename)):
                    caller = caller.f_back
                if caller is not None:
                    found = LibraryCall(*key, *spec, frame.f_locals.get(spec[0]), _line(caller),
                                        _expression(caller, tensor))
        frame = frame.f_back
    return found


def _expression(frame: FrameType, tensor: torch.Tensor) -> str:
    """A name of ``frame``'s code bound to ``tensor`` (its locals, closure cells, globals), or
    an attribute of one such value (``func.A``); ``""`` when there is none."""
    scopes = [frame.f_locals, frame.f_globals]
    for scope in scopes:
        for name, value in scope.items():
            if value is tensor and name.isidentifier():
                return name
    for scope in scopes:
        for name, value in scope.items():
            held = getattr(value, "__dict__", None)
            if isinstance(value, nn.Module) and isinstance(held, dict):
                found = next((a for a, v in held.items() if v is tensor and a.isidentifier()),
                             None)
                if found is not None and name.isidentifier():
                    return f"{name}.{found}"
    return ""


def _wrong(held: object, value: object, tensor: torch.Tensor) -> bool:
    """Whether an argument's value ``held`` passes ``tensor`` no gradient: not ``value``, or
    (``value`` ``None``) a tuple that does not hold ``tensor``."""
    if value is not None:
        return held != value
    return all(t is not tensor for t in (held if isinstance(held, (tuple, list)) else ()))


_GRAD_OFF = re.compile(r"^\s*(async\s+)?with\b.*\b(no_grad|inference_mode|set_grad_enabled)\b")


def grad_off_line(depth: int = 2) -> Line | None:
    """The ``with torch.no_grad():`` (``inference_mode``, ``set_grad_enabled``) statement of
    the user's code that encloses the running line, in the innermost frame that has one: where
    gradients were switched off. Read from the source by indentation; ``None`` when no frame's
    source shows one (a decorator, a context entered elsewhere)."""
    return grad_off_block(depth + 1)[0]


def grad_off_block(depth: int = 2) -> tuple[Line | None, Line | None]:
    """:func:`grad_off_line`, and the line of its block running in that frame: the block's own
    statement that leads to the running line (``nll, state = unroll(...)``, where ``unroll``
    calls the network), which is where a fix moves a call out of the block."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        path = frame.f_code.co_filename
        if not _library(path):
            found = _enclosing_with(path, frame.f_lineno, frame.f_code.co_firstlineno)
            if found is not None:
                number, text = found
                return (Line(os.path.basename(path), number, frame.f_code.co_name, text, path,
                             _inside(frame)), _line(frame))
        frame = frame.f_back
    return None, None


#: a function's decorator that runs it with gradients off
_GRAD_OFF_DECORATOR = re.compile(r"^\s*@\s*(torch\.)?(no_grad|inference_mode)\b")


def cut_by_user(depth: int = 2) -> bool:
    """Whether the user's code switched gradients off for the running line itself: the
    innermost frame of the user's own code runs it inside a ``with torch.no_grad():`` of
    its function, or the function is decorated with ``@torch.no_grad()`` (not a library's
    own switch, as a power iteration's inside a layer)."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        path = frame.f_code.co_filename
        if not _library(path):
            if _installed(path):
                return False
            first = frame.f_code.co_firstlineno
            at = first
            while (text := linecache.getline(path, at)).lstrip().startswith("@"):
                if _GRAD_OFF_DECORATOR.match(text):
                    return True
                at += 1
            return _enclosing_with(path, frame.f_lineno, first) is not None
        frame = frame.f_back
    return False


def _enclosing_with(path: str, number: int, first: int) -> tuple[int, str] | None:
    """``(line number, text)`` of the grad-off ``with`` whose block holds line ``number``,
    looking up to the function's first line ``first``."""
    text = linecache.getline(path, number)
    indent = len(text) - len(text.lstrip())
    for at in range(number - 1, first - 1, -1):
        line = linecache.getline(path, at)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        level = len(line) - len(line.lstrip())
        if level < indent:
            if _GRAD_OFF.match(line):
                return at, line.strip()
            indent = level
    return None


#: ``id`` of the code objects where a walk up the stack stops (the audit's own entry point:
#: frames above it are the caller of the audit, not the step); ids, since hashing a code
#: object reads all of it, at every frame of every walk
STOP_CODES: set[int] = set()


def user_stack(depth: int = 2, *, start: FrameType | None = None) -> tuple[Line, ...]:
    """The frames of the user's code from the innermost out to the step function, as lines
    (innermost first): where something happens, then each call that led there. Each line's
    ``inside`` names the module whose ``forward`` runs it. Frames of installed packages are
    left out (kept only when there is no other). The walk starts ``depth`` frames up, or at
    frame ``start``."""
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(depth) if start is None else start
    while frame is not None and id(frame.f_code) not in STOP_CODES:
        frames.append(frame)
        frame = frame.f_back
    inside = ""
    lines, installed = [], []
    for frame in reversed(frames):  # outermost first: a forward encloses what it calls
        owner = _forward_of(frame)
        if owner is not None:
            inside = type(owner).__name__
        path = frame.f_code.co_filename
        if _library(path):
            continue
        if _installed(path):  # read only when the stack holds no other
            installed.append((frame, inside))
        else:
            lines.append(_line(frame, inside))
    return tuple(reversed(lines or [_line(frame, inside) for frame, inside in installed]))
