"""Audit a training script as it runs, unchanged: ``toolkit audit SCRIPT [ARGS...]``.

:mod:`.runner` runs the script as ``__main__`` with its own arguments under the hooks of
:mod:`.hooks`; :mod:`.session` keeps the watch (iterations, the ledger of :mod:`.ledger`, the
rules); :mod:`.graph` reads a backward's graph before it runs; :mod:`.frames` finds the user's
lines; :mod:`.edits` writes the fixes into the script's text and :mod:`.verify` proves each by
rerunning the edited script; :mod:`.cli` is the command.
"""

from toolkit.lens.audit.watch.cli import main

__all__ = ["main"]
