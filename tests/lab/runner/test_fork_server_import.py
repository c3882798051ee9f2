"""The fork server's preload module blocks SIGINT and SIGTERM only in a fork server: imported
in any other process (a tool that imports every module), it leaves the signal mask as it was,
which every process started from there would inherit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_importing_the_preload_module_elsewhere_blocks_no_signal() -> None:
    probe = ("import signal, toolkit.lab.execute.fork_server; "
             "print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    blocked = json.loads(proc.stdout)
    assert int(signal.SIGINT) not in blocked and int(signal.SIGTERM) not in blocked
