"""Executing planned runs: one run's life (:mod:`.run`) and what it is handed
(:mod:`.context`), many runs here or in a process pool (:mod:`.local`) or on Dask
(:mod:`.dask`), and ``--resume`` (:mod:`.resume`)."""
