"""Imported first by a local pool's fork server (``set_forkserver_preload``) and nowhere else:
from here on SIGINT and SIGTERM are blocked there, and in every worker forked from it until the
worker installs its own handlers (:func:`~toolkit.lab.execute.signals.block_for_workers`). Ctrl-C
while the pool starts thus neither ends the fork server as it preloads nor a worker half
started."""

from __future__ import annotations

from toolkit.lab.execute.signals import block_for_workers

block_for_workers()
