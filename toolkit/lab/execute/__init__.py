"""Executing planned runs: one run's life (:mod:`.run`), its context (:mod:`.context`), many
runs here, in a pool (:mod:`.local`) or on Dask (:mod:`.dask`), and ``--resume``."""
