"""``python -m toolkit.audit SCRIPT [ARGS...]``: the same as ``toolkit audit`` (see
:mod:`toolkit.audit.cli`)."""

import sys

from toolkit.audit.cli import main

if __name__ == "__main__":
    sys.exit(main())
