"""How much work one command may make: counted before any of it is made.

Light on purpose (no torch, no pydantic): the command line reads it to print its help.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_RUNS"]

#: The most runs one command makes unless told otherwise (``--max-runs``, ``max_runs=``):
#: a typo in a seed range or a sweep list is refused by its count, before anything is made.
DEFAULT_MAX_RUNS = 10_000
