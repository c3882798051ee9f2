"""Experiment runner: configs, run directories, metrics, comparisons, sweeps and the CLI.

Measurement probes (``measure_memory``, ``time_fn``) live in :mod:`toolkit.runner.probes`.
"""

from toolkit.runner.probes import MemoryStats, TimingStats, measure_memory, time_fn

__all__ = ["MemoryStats", "TimingStats", "measure_memory", "time_fn"]
