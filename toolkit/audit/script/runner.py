"""Run the user's script, unchanged, as ``__main__`` with its own arguments, under a watch; stop
it cleanly after its audited iterations; hand its own exit status and exceptions through."""

from __future__ import annotations

import contextlib
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import random
import runpy
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from toolkit.audit.script.hooks import installed
from toolkit.audit.script.session import Stop, Watch

__all__ = ["Outcome", "run_script"]

_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass
class Outcome:
    """How the script's run ended: ``stopped`` after its audited iterations, ``ended`` on its
    own, with its ``exit_code`` (``sys.exit``) or ``error`` (an exception it raised)."""

    watch: Watch
    stopped: bool = False
    exit_code: int | None = None
    error: BaseException | None = None
    traceback: list[str] = field(default_factory=list)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


class _Elsewhere(importlib.abc.MetaPathFinder):
    """Imports an edited module that lives outside the script's folder from its edited copy:
    the module ``sys.path`` finds at ``real`` is loaded from ``copies[real]``."""

    def __init__(self, copies: Mapping[str, str]) -> None:
        self.copies = {os.path.realpath(k): v for k, v in copies.items()}

    def find_spec(self, name, path, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.origin:
            return None
        copy = self.copies.get(os.path.realpath(spec.origin))
        if copy is None:
            return None
        return importlib.util.spec_from_file_location(
            name, copy, submodule_search_locations=spec.submodule_search_locations)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """The objects alive before the script runs (torch's and the toolkit's modules, classes and
    functions: about 180,000 with torch alone) kept out of the garbage collector's scans until
    it ends (:func:`gc.freeze`). The watch's records are many small containers, which make
    Python collect its oldest generation during an audited iteration of a large model; each
    such collection would scan that whole heap again (a tenth of a second here). Left as it is
    where the process froze objects of its own."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def _served(copies: Mapping[str, str] | None) -> Iterator[None]:
    if not copies:
        yield
        return
    finder = _Elsewhere(copies)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def run_script(script: str, args: list[str], watch: Watch, seed: int = 0,
               elsewhere: Mapping[str, str] | None = None) -> Outcome:
    """Run ``script`` with ``sys.argv = [script, *args]`` under ``watch``, as ``python script``
    would: its folder first on ``sys.path``, the working folder as it is now (and put back
    afterwards, whatever the script ``chdir``-ed to). The random generators of torch, numpy and
    ``random`` start from ``seed`` (the script may seed them again), so that a rerun of the same
    script is the same run. ``elsewhere`` maps modules outside the script's folder to edited
    copies to import instead (a verification rerun)."""
    path = os.path.abspath(script)
    cwd = os.getcwd()
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(path))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    outcome = Outcome(watch)
    try:
        with _frozen_heap(), installed(watch), _served(elsewhere):
            runpy.run_path(path, run_name="__main__")
    except Stop:
        outcome.stopped = True
    except SystemExit as exit_:
        outcome.exit_code = _exit_status(exit_.code)
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # the script's own exception, shown as Python shows it
        outcome.error = err
        tb = err.__traceback__
        while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != path:
            tb = tb.tb_next
        shown = traceback.TracebackException(type(err), err, tb or err.__traceback__)
        shown.stack = traceback.StackSummary.from_list(
            [f for f in shown.stack if not os.path.abspath(f.filename).startswith(_OURS)])
        outcome.traceback = list(shown.format())
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    return outcome
