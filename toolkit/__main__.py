"""``python -m toolkit`` runs the command-line interface."""

import sys

from toolkit.lab.cli import main

if __name__ == "__main__":  # not when a spawned worker process re-imports the main module
    sys.exit(main())
