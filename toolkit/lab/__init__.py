"""The lab: experiments run with and without their blocks, and what they leave behind.

- :mod:`toolkit.lab.runner` — configs, runs, seeds, verdicts over seeds, executors and sweeps;
- :mod:`toolkit.lab.report` — findings, figures, ``report.html``/``report.md`` and ``compare``,
  drawn only from a run's files;
- :mod:`toolkit.lab.cli` — the ``toolkit`` command line, which hands experiments (found through
  entry points) to the runner and then calls the report;
- :mod:`toolkit.lab.measure` — timers, memory probes, interleaved benchmark rounds;
- :mod:`toolkit.lab.data` — datasets, generated or bundled with scikit-learn (no downloads);
- :mod:`toolkit.lab.style` — one palette and figure grammar for every figure.

The lab builds on :mod:`toolkit.algorithms`, :mod:`toolkit.lens` and :mod:`toolkit.core`;
none of them imports the lab.
"""
