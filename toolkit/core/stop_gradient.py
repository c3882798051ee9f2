"""The switchable, named ``stop_gradient`` primitive.

``stop_gradient(x)`` is the identity going forward and passes no gradient backward, like
``tf.stop_gradient`` and ``jax.lax.stop_gradient``. Unlike both, a block can carry a dotted
``name`` and be switched off by name with :func:`disable_blocks`, so the same code runs "with"
and "without" its block; :func:`seen_blocks` tells which named blocks actually executed.

:func:`as_constant` evaluates a quantity behind a named block: with the block active no graph is
recorded for it (it would only be cut), with the block disabled the graph is kept. It is, with
``stop_gradient`` itself, the only code that reads the switch; algorithms call it (or
:func:`require_block`, for code that cannot run without its block) and never decide a cut
themselves.

The state (which blocks are disabled, which were seen) lives in :mod:`contextvars`, so threads
and asyncio tasks with different settings do not interfere. So do the hooks of
:func:`observe_cuts`, through which the lens sees (and marks) every cut that runs.

A pattern of :func:`disable_blocks` that matches no known block (every algorithm's ``BLOCK``
and every block that ran so far in the process, :func:`known_blocks`) would switch nothing off,
so the "unblocked" variant would silently equal the blocked one: it warns, naming the known
blocks and the nearest one (``strict=True``: it raises).
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import copy
import difflib
import fnmatch
import functools
import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from toolkit._utils.caller import user_stacklevel
from toolkit._utils.param_validation import show_value
from toolkit._utils.trees import tree_map

__all__ = [
    "BlockNotSwitchableError",
    "as_constant",
    "disable_blocks",
    "is_block_disabled",
    "is_compiling",
    "known_blocks",
    "observe_cuts",
    "record_blocks",
    "require_block",
    "reset_seen_blocks",
    "seen_blocks",
    "stop_gradient",
]

T = TypeVar("T")

_NAME_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")

# Each frame of the stack is one active ``disable_blocks``: ``None`` means "every block",
# otherwise a tuple of fnmatch patterns. The tuple is immutable, so a context can share it.
_DISABLED: contextvars.ContextVar[tuple[tuple[str, ...] | None, ...]] = contextvars.ContextVar(
    "toolkit_disabled_blocks", default=()
)
# Names of executed named blocks, in first-seen order (dict as an ordered set). ``None`` until
# first use so that no mutable default is shared between threads.
_SEEN: contextvars.ContextVar[dict[str, None] | None] = contextvars.ContextVar(
    "toolkit_seen_blocks", default=None
)
# Every name that ran in this process, in any context: what ``disable_blocks`` checks its
# patterns against, with the algorithms' ``BLOCK`` constants. Only ever grows.
_EVER_SEEN: set[str] = set()
# torch.compile (dynamo) cannot read a ContextVar. Under compilation the decision is made at
# trace time and ``_COMPILE_KEY`` (the disabled-stack of the context that changed it last) is
# passed along, so that dynamo guards on it and re-traces when the setting changes.
_COMPILE_KEY: tuple[tuple[str, ...] | None, ...] = ()
#: What :func:`observe_cuts` installs: called with a block's value and its name (``None``:
#: unnamed), it returns what the block returns.
CutHook = Callable[[Any, str | None], Any]

# The hooks of :func:`observe_cuts`: ``_CUT_HOOK`` replaces the plain cut of an active block
# (the lens's ``trace_cuts`` marks it), ``_OPEN_HOOK`` what a disabled block returns (the step
# audit marks it); ``None``: the plain behaviour. Never consulted under torch.compile.
_CUT_HOOK: contextvars.ContextVar[CutHook | None] = contextvars.ContextVar(
    "toolkit_cut_hook", default=None)
_OPEN_HOOK: contextvars.ContextVar[CutHook | None] = contextvars.ContextVar(
    "toolkit_open_hook", default=None)


def _dynamo_is_compiling() -> bool:  # torch < 2.3: only dynamo knows (imported on demand)
    import torch._dynamo

    return bool(torch._dynamo.is_compiling())


#: Whether the code is being traced by ``torch.compile`` / ``torch.export``. One helper for the
#: whole toolkit: ``torch.compiler.is_compiling`` (torch >= 2.3), else dynamo's own spelling.
is_compiling: Callable[[], bool] = getattr(torch.compiler, "is_compiling", None) or (
    _dynamo_is_compiling)


class BlockNotSwitchableError(RuntimeError):
    """A named block was disabled where the code cannot run without it (see :func:`require_block`)."""


def _check_name(name: object, *, where: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{where}: name must be a str (a dotted name such as 'em.responsibilities'), "
                        f"got {show_value(name)}")
    if not name:
        raise ValueError(f"{where}: name must be a non-empty dotted string such as "
                         f"'em.responsibilities', got ''")
    if not _NAME_RE.match(name):
        raise ValueError(f"{where}: name must be dot-separated parts of letters, digits, '_' or '-' "
                         f"(e.g. 'softmax.max'), got {name!r}")
    return name


def _disabled_by(stack: tuple[tuple[str, ...] | None, ...], name: str | None) -> bool:
    for frame in stack:
        if frame is None:
            return True
        if name is not None and any(fnmatch.fnmatchcase(name, pattern) for pattern in frame):
            return True
    return False


def _record(name: str) -> None:
    _EVER_SEEN.add(name)
    seen = _SEEN.get()
    if seen is None:
        seen = {}
        _SEEN.set(seen)
    seen[name] = None


def _decide_at_trace_time(name: str | None, key: object) -> bool:
    # ``key`` is unused here; passing it makes dynamo guard on its value.
    if name is not None:
        _record(name)
    return _disabled_by(_DISABLED.get(), name)


# What ``torch.compiler.assume_constant_result`` does (dynamo calls the function at trace time and
# uses its result as a constant), without importing ``torch._dynamo`` when the toolkit is
# imported: that import alone costs about a second.
_decide_at_trace_time._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _decide(name: str | None) -> bool:
    """Whether the block ``name`` is disabled right now; records ``name`` as seen."""
    if is_compiling():
        return _decide_at_trace_time(name, _COMPILE_KEY)
    if name is not None:
        _record(name)
    return _disabled_by(_DISABLED.get(), name)


def is_block_disabled(name: str | None = None) -> bool:
    """Whether a block called ``name`` (``None``: an unnamed block) is disabled right now."""
    if name is not None:
        _check_name(name, where="is_block_disabled")
    return _disabled_by(_DISABLED.get(), name)


def _opened(x: T, name: str | None) -> T:
    """What a disabled block returns: ``x`` itself, or ``x`` marked by the audit's hook."""
    hook = None if is_compiling() else _OPEN_HOOK.get()
    return x if hook is None else hook(x, name)


def _stop_leaf(x: Any) -> Any:
    return x.detach() if isinstance(x, torch.Tensor) else x


def stop_gradient(x: T, name: str | None = None) -> T:
    """Identity going forward; passes no gradient backward.

    Operationally ``stop_gradient`` is the identity function: it returns ``x`` unchanged. It
    prevents the flow of gradients through ``x`` in reverse mode at every order (``backward``,
    ``torch.autograd.grad``, grad-of-grad, ``torch.func.grad``/``jacrev``/``hessian``) and in
    forward mode (``torch.func.jvp``/``jacfwd``, ``torch.autograd.forward_ad``). ``x`` may be a
    tensor or a nested structure of dicts, lists, tuples, namedtuples and dataclass instances;
    every tensor leaf is blocked, containers are rebuilt with the same type and non-tensor leaves
    are returned unchanged.

    Each returned tensor is ``leaf.detach()``: it **shares storage** with the input, so an
    in-place edit of one is visible through the other (clone it if you need a copy).

    Args:
        x: a tensor or a nested structure containing tensors.
        name: optional dotted name such as ``"em.responsibilities"``. Named blocks can be
            switched off with ``disable_blocks("em.*")`` and are recorded by :func:`seen_blocks`.
            Unnamed blocks are switched off only by ``disable_blocks()`` with no pattern.

    Returns:
        ``x`` with every tensor leaf detached, or ``x`` itself when the block is disabled.

    Example (the case from JAX's documentation: 6.0 without the block, 0.0 with it):

    >>> import torch
    >>> from toolkit import stop_gradient
    >>> f = lambda x: x**2
    >>> torch.func.grad(f)(torch.tensor(3.0))
    tensor(6.)
    >>> torch.func.grad(lambda x: f(stop_gradient(x)))(torch.tensor(3.0))
    tensor(0.)

    Note:
        Under ``torch.compile`` the disabled/enabled decision is taken when the function is
        traced; dynamo guards on the setting and re-traces when it changes. Names are recorded
        for :func:`seen_blocks` at trace time only. Calling one compiled function concurrently
        from threads with *different* ``disable_blocks`` settings is not supported.
    """
    if name is not None:
        _check_name(name, where="stop_gradient")
    if _decide(name):
        return _opened(x, name)
    hook = None if is_compiling() else _CUT_HOOK.get()
    return tree_map(_stop_leaf, x) if hook is None else hook(x, name)


def as_constant(fn: Callable[..., T], *args: Any, name: str, **kwargs: Any) -> T:
    """Evaluate ``fn(*args, **kwargs)`` as a constant behind the named block ``name``.

    The quantity is meant to be a constant for the gradient (responsibilities in an M-step,
    negative samples of a Markov chain, an adversarial example, the max of a softmax shift), so
    recording its graph would be work thrown away by the cut. With the block active ``fn`` runs
    under ``torch.no_grad()`` and its result passes :func:`stop_gradient`; inside
    ``disable_blocks(name)`` ``fn`` runs in the caller's grad mode, the graph is kept, and the
    result comes back untouched, so gradients flow through it. Either way the value is the same.

    ``fn`` may read ``torch.is_grad_enabled()`` to know whether a graph is wanted (an attack
    then asks autograd for ``create_graph=True``); it never needs to read the switch itself.
    The result may be a tensor or a nested structure (as for :func:`stop_gradient`). The name
    is recorded for :func:`seen_blocks` whether the block is active or disabled. Under
    ``torch.compile`` the decision is taken at trace time, as for ``stop_gradient``.

    Args:
        fn: computes the quantity.
        *args, **kwargs: passed to ``fn``.
        name: the block's dotted name (keyword-only, required).

    >>> import torch
    >>> from toolkit import as_constant, disable_blocks
    >>> w = torch.tensor(3.0, requires_grad=True)
    >>> target = as_constant(lambda: 2 * w, name="demo.target")
    >>> target.requires_grad, target.grad_fn is None
    (False, True)
    >>> with disable_blocks("demo.*"):
    ...     target = as_constant(lambda: 2 * w, name="demo.target")
    >>> torch.autograd.grad(target, w)[0]
    tensor(2.)
    """
    _check_name(name, where="as_constant")
    if not callable(fn):
        raise TypeError(f"as_constant: fn must be callable, got {type(fn).__name__}")
    if _decide(name):
        return _opened(fn(*args, **kwargs), name)
    hook = None if is_compiling() else _CUT_HOOK.get()
    if hook is not None:  # the lens records the graph behind the cut, then marks the cut
        return hook(fn(*args, **kwargs), name)
    with torch.no_grad():
        value = fn(*args, **kwargs)
    # no_grad records no graph, but fn may return an input that requires grad, and forward-mode
    # tangents pass no_grad: the cut itself is the detach of every leaf.
    return tree_map(_stop_leaf, value)


def require_block(name: str, *, where: str, why: str) -> None:
    """Raise :class:`BlockNotSwitchableError` if the block ``name`` is disabled right now.

    For code paths that cannot compute "without the block" (an analytic backward with no path
    through the blocked quantity, a sampled chain through which no gradient can flow): they call
    this where the block would be, so that ``disable_blocks`` is never silently ignored. The
    name is recorded for :func:`seen_blocks` either way.

    >>> from toolkit import disable_blocks, require_block
    >>> require_block("demo.max", where="demo", why="the backward is analytic")
    >>> with disable_blocks("demo.*"):
    ...     require_block("demo.max", where="demo", why="the backward is analytic")
    Traceback (most recent call last):
    ...
    toolkit.core.stop_gradient.BlockNotSwitchableError: demo: the block 'demo.max' cannot be switched off here (the backward is analytic)
    """
    _check_name(name, where="require_block")
    for arg, text in (("where", where), ("why", why)):
        if not isinstance(text, str):
            raise TypeError(f"require_block: {arg} must be a str (it is shown in the error "
                            f"that names the block), got {show_value(text)}")
    if _decide(name):
        raise BlockNotSwitchableError(f"{where}: the block {name!r} cannot be switched off here "
                                      f"({why})")


class disable_blocks(contextlib.ContextDecorator):
    """Switch blocks off so that gradients flow through them.

    With no pattern every block is disabled, named or not. With patterns (``fnmatch`` globs,
    matched case-sensitively against the dotted name) only the named blocks that match are
    disabled; unnamed blocks stay active. Contexts nest (the union of all active ones applies),
    are local to the current thread / asyncio task (``contextvars``), and the object is usable as
    a decorator.

    A pattern that matches no known block (:func:`known_blocks`: every algorithm's ``BLOCK`` and
    every block that ran so far) would switch nothing off. One in an algorithm's family warns
    on entry (``'simsiam.targt'``: "did you mean 'simsiam.target'?"); any other warns on exit
    if no block that ran inside matched it either (it may name a block of your own that has not
    run yet). Both
    warnings list the known blocks. With ``strict=True`` such a pattern raises ``ValueError`` on
    entry instead.

    >>> import torch
    >>> from toolkit import disable_blocks, stop_gradient
    >>> x = torch.tensor(3.0, requires_grad=True)
    >>> with disable_blocks("demo.*"):
    ...     y = stop_gradient(x, name="demo.block") ** 2
    >>> torch.autograd.grad(y, x)[0]
    tensor(6.)
    """

    def __init__(self, *patterns: str, strict: bool = False) -> None:
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise TypeError(f"disable_blocks: patterns must be str (fnmatch globs such as "
                                f"'em.*'), got {show_value(pattern)}")
            if not pattern:
                raise ValueError("disable_blocks: a pattern must be a non-empty glob such as "
                                 "'em.*'; call disable_blocks() with no argument to disable all")
        if not isinstance(strict, bool):
            raise TypeError(f"disable_blocks: strict must be a bool, got {show_value(strict)}")
        self.patterns: tuple[str, ...] | None = tuple(patterns) if patterns else None
        self.strict = strict
        self._tokens: list[contextvars.Token] = []
        # the patterns that may name blocks of the caller's own: checked when a ``with`` ends
        self._pending = self._check_patterns() if not is_compiling() else ()

    def __repr__(self) -> str:
        args = [repr(p) for p in self.patterns or ()] + (["strict=True"] if self.strict else [])
        return f"disable_blocks({', '.join(args)})"

    def _recreate_cm(self) -> disable_blocks:
        # As a decorator, each call gets a fresh context manager, so one decorated function can
        # run concurrently in several threads; the patterns were checked when it was created.
        fresh = copy.copy(self)
        fresh._tokens = []
        return fresh

    def __enter__(self) -> disable_blocks:
        global _COMPILE_KEY
        stack = (*_DISABLED.get(), self.patterns)
        self._tokens.append(_DISABLED.set(stack))
        _COMPILE_KEY = stack
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        global _COMPILE_KEY
        _DISABLED.reset(self._tokens.pop())
        _COMPILE_KEY = _DISABLED.get()
        if exc_type is None and self._pending and not is_compiling():
            known = known_blocks()  # now with the blocks that ran inside
            for pattern in self._pending:
                if not _matches_any(pattern, known):
                    warnings.warn(_unmatched_message(pattern, known), UserWarning,
                                  stacklevel=user_stacklevel())

    def _check_patterns(self) -> tuple[str, ...]:
        """The patterns that match no known block. ``strict``: the first raises
        ``ValueError``. One in an algorithm's family (``'em.'`` and a typo: an algorithm's
        blocks are all known) warns now; the others may name blocks of the caller's own that
        have not run yet: they are returned, to be checked when a ``with`` ends."""
        known = known_blocks()
        unmatched = [p for p in self.patterns or () if not _matches_any(p, known)]
        if self.strict and unmatched:
            raise ValueError(_unmatched_message(unmatched[0], known))
        families = {name.split(".")[0] for name in _algorithm_blocks()}
        pending = []
        for pattern in unmatched:
            if pattern.split(".")[0] in families:
                warnings.warn(_unmatched_message(pattern, known), UserWarning,
                              stacklevel=user_stacklevel())
            else:
                pending.append(pattern)
        return tuple(pending)


def _matches_any(pattern: str, names: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def _nearest(pattern: str, names: tuple[str, ...]) -> str | None:
    """The known name, or family glob (``'em.*'``), closest to ``pattern`` (difflib), if any."""
    families = sorted({f"{name.split('.')[0]}.*" for name in names})
    close = difflib.get_close_matches(pattern, [*names, *families], n=1, cutoff=0.75)
    return close[0] if close else None


def _unmatched_message(pattern: str, known: tuple[str, ...]) -> str:
    nearest = _nearest(pattern, known)
    hint = f"did you mean {nearest!r}? " if nearest else ""
    return (f"disable_blocks: {pattern!r} matches no known block, so it switches nothing off "
            f"and the code runs as with its blocks; {hint}known blocks: "
            f"{', '.join(known) if known else '(none)'}")


@functools.cache
def _algorithm_blocks() -> tuple[str, ...]:
    """The ``BLOCK`` and ``*_BLOCK`` string constants of :mod:`toolkit.algorithms`' modules.

    Read from the source files (``ast``), not imported: importing every algorithm would load
    scikit-learn, scipy and pandas, about a second, for a check of names.
    """
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "algorithms")
    names: set[str] = set()
    for folder, _, files in os.walk(root):
        for file in files:
            if not file.endswith(".py"):
                continue
            try:
                with open(os.path.join(folder, file), encoding="utf-8") as handle:
                    tree = ast.parse(handle.read())
            except (OSError, SyntaxError, ValueError):  # an unreadable file declares nothing
                continue
            for node in tree.body:
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                        and isinstance(node.value.value, str)
                        and any(isinstance(t, ast.Name)
                                and (t.id == "BLOCK" or t.id.endswith("_BLOCK"))
                                for t in node.targets)):
                    names.add(node.value.value)
    return tuple(sorted(names))


def known_blocks() -> tuple[str, ...]:
    """The block names :func:`disable_blocks` checks its patterns against, sorted.

    Every algorithm's ``BLOCK`` (and ``*_BLOCK``) constant, found without importing the
    algorithms, and every named block that ran in this process so far (in any thread or
    context), so a caller's own blocks are known once they have run.

    >>> from toolkit.core.stop_gradient import known_blocks
    >>> "simsiam.target" in known_blocks()
    True
    """
    return tuple(sorted({*_algorithm_blocks(), *_EVER_SEEN}))


def seen_blocks() -> tuple[str, ...]:
    """Names of the named blocks executed in this context since the last reset, in order.

    A name is recorded when its block ran (``stop_gradient``, ``as_constant`` or
    ``require_block`` with that name), whether it was active or disabled at the time.

    >>> import torch
    >>> from toolkit import record_blocks, stop_gradient
    >>> with record_blocks() as names:
    ...     _ = stop_gradient(torch.ones(2), name="demo.a")
    >>> names
    ['demo.a']
    """
    seen = _SEEN.get()
    return tuple(seen) if seen else ()


def reset_seen_blocks() -> None:
    """Forget the names recorded so far in this context."""
    _SEEN.set({})


@contextlib.contextmanager
def record_blocks() -> Iterator[list[str]]:
    """Scope :func:`seen_blocks`: yields a list filled, on exit, with the names executed inside.

    The names seen before the ``with`` are restored afterwards, merged with the new ones.
    """
    outer = _SEEN.get()
    inner: dict[str, None] = {}
    token = _SEEN.set(inner)
    names: list[str] = []
    try:
        yield names
    finally:
        names.extend(inner)
        _SEEN.reset(token)
        if outer is not None:
            outer.update(inner)
        elif inner:
            _SEEN.set(dict(inner))


@contextlib.contextmanager
def observe_cuts(*, on_cut: CutHook | None = None, on_open: CutHook | None = None
                 ) -> Iterator[None]:
    """Let an observer see, and mark, every toolkit block that runs inside the ``with``.

    The hook for tools that read the graphs these cuts shape (the lens's
    :func:`~toolkit.lens.trace_cuts` and the step audit use it). Each hook is called as
    ``hook(x, name)`` with the block's value and its name (``None``: unnamed) and returns what
    the block returns instead:

    - ``on_cut``: every *active* :func:`stop_gradient` and :func:`as_constant`, in place of
      the plain cut (every tensor leaf detached). For ``as_constant`` ``fn`` then runs in the
      caller's grad mode, so ``x`` carries the graph behind the cut. The hook must keep the
      values and pass no gradient back to ``x`` (detach each leaf, or route it through an
      ``autograd.Function`` whose backward returns no gradient).
    - ``on_open``: every *disabled* block, in place of ``x`` itself. The hook must be the
      identity for values and gradients (e.g. a view through an identity ``Function``).

    A hook left ``None`` keeps the one of the enclosing ``observe_cuts`` (none: the plain
    behaviour), so observers of the two kinds nest; an inner hook replaces an outer one of its
    kind until the ``with`` ends. Like :func:`disable_blocks` the setting is local to the thread
    / asyncio task (``contextvars``). Under ``torch.compile`` the hooks are never consulted.
    :func:`require_block` makes no value and calls neither hook.

    >>> import torch
    >>> from toolkit import disable_blocks, observe_cuts, stop_gradient
    >>> seen = []
    >>> def on_cut(x, name):
    ...     seen.append(f"cut {name}")
    ...     return x.detach()
    >>> def on_open(x, name):
    ...     seen.append(f"open {name}")
    ...     return x
    >>> w = torch.tensor(3.0, requires_grad=True)
    >>> with observe_cuts(on_cut=on_cut, on_open=on_open):
    ...     y = stop_gradient(w, name="demo.a")
    ...     with disable_blocks("demo.b"):
    ...         z = stop_gradient(w, name="demo.b")
    >>> seen, y.requires_grad, z is w
    (['cut demo.a', 'open demo.b'], False, True)
    """
    for arg, hook in (("on_cut", on_cut), ("on_open", on_open)):
        if hook is not None and not callable(hook):
            raise TypeError(f"observe_cuts: {arg} must be callable as {arg}(x, name) or None, "
                            f"got {type(hook).__name__}")
    tokens = [(var, var.set(hook)) for var, hook in ((_CUT_HOOK, on_cut), (_OPEN_HOOK, on_open))
              if hook is not None]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
