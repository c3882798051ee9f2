"""Imported last by a pool's fork server: it has imported everything it was asked to, and says
so (see :mod:`toolkit.lab.execute.server`). Imported anywhere else, it does nothing."""

from toolkit.lab.execute.server import announce_ready

announce_ready()
