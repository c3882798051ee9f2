"""``python -m toolkit`` runs the command-line interface."""

import sys

from toolkit.cli import main

sys.exit(main())
