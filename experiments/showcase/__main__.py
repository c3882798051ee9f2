"""``python -m stop_gradient_experiments.showcase``: every experiment's QUICK comparison, one
report (what ``toolkit run configs/showcase.toml`` runs)."""

from toolkit.lab.cli import run_module

raise SystemExit(run_module("stop_gradient_experiments.showcase"))
