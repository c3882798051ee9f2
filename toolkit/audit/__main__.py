"""``python -m toolkit.audit SCRIPT [ARGS...]``: the same as ``toolkit audit`` (see
:mod:`toolkit.lens.audit.watch`)."""

import sys

from toolkit.lens.audit.watch.cli import main

if __name__ == "__main__":
    sys.exit(main())
