"""``python -m stop_gradient_experiments.dice``: the experiment's QUICK comparison."""

from toolkit.lab.cli import run_module

raise SystemExit(run_module("stop_gradient_experiments.dice"))
