"""A training script run unchanged under hooks, for ``toolkit audit SCRIPT [ARGS...]``
(:mod:`toolkit.audit.cli`).

:mod:`.runner` runs the script as ``__main__`` with its own arguments under the hooks of
:mod:`.hooks`; :mod:`.session` keeps the watch (iterations, the ledger of :mod:`.ledger`, the
rules); :mod:`.graph` reads a backward's graph before it runs; :mod:`.frames` finds the user's
lines; :mod:`.edits` writes the fixes into the script's text and :mod:`.verify` proves each by
rerunning the edited script.
"""
