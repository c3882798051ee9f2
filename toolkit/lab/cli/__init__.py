"""The ``toolkit`` command line: :func:`main` is the console script, :func:`run_module` runs an
experiment module as a script with its QUICK params."""

from toolkit.lab.cli.app import main
from toolkit.lab.cli.commands import run_module

__all__ = ["main", "run_module"]
