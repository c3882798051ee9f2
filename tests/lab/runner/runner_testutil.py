"""Helpers of the runner tests: paths of the fixtures and the CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[3]


def cli(*args: str, cwd: Path | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """``python -m toolkit ARGS`` in a subprocess (fixture experiments on the path)."""
    env = dict(os.environ)
    env["TOOLKIT_EXPERIMENTS_PATH"] = str(FIXTURES / "experiments")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "toolkit", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
