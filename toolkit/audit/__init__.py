"""``python -m toolkit.audit SCRIPT [ARGS...]``: the same as ``toolkit audit`` (see
:mod:`toolkit.lens.audit.watch`)."""
