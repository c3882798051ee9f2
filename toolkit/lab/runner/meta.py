"""``meta.json``: what a run directory says about how its run went.

Written when the run starts (status ``running``, where and with what it runs), rewritten as it
ends (status, times, blocks seen, errors), and saved however a full disk allows
(:func:`save_meta`). Readers go through :class:`~toolkit.lab.runner.results.RunResults`.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toolkit.lab.runner.liveness import this_host
from toolkit.lab.runner.results import atomic_write_json, to_jsonable, utc_now

__all__ = ["ESSENTIAL", "local_worker", "save_meta", "start_meta", "versions"]

#: What meta.json keeps when a full disk leaves room for nothing more than its own blocks.
ESSENTIAL = ("status", "experiment", "run_id", "seed", "host", "pid", "started", "ended",
             "duration_s", "error")


def versions() -> dict[str, str]:
    """The versions that made a run's numbers."""
    import numpy
    import torch

    import toolkit

    return {"python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "toolkit": toolkit.__version__}


def local_worker() -> str:
    """``host:pid`` of this process (``meta.json``'s ``executor.worker`` for local runs)."""
    return f"{this_host()}:{os.getpid()}"


def start_meta(spec: Any, run_id: str, *, argv: Sequence[str] | None,
               executor: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``meta.json`` of a run of ``spec`` (a :class:`~toolkit.lab.runner.planning.RunSpec`)
    that starts now."""
    config = spec.config
    return {
        "status": "running",
        "experiment": config.experiment,
        "run_id": run_id,
        "seed": config.seed,
        "device": str(spec.device),
        "device_requested": config.device,
        "dtype": config.dtype,
        "threads": config.threads,
        "executor": dict(executor or {"kind": "local", "worker": local_worker()}),
        "disable_blocks": list(config.disable_blocks),
        "sweep_point": config.sweep_point,
        "config_source": config.source,
        "argv": list(sys.argv if argv is None else argv),
        "versions": versions(),
        "platform": platform.platform(),
        "host": this_host(),
        "pid": os.getpid(),
        "started": utc_now().isoformat(),
        "ended": None,
        "duration_s": None,
        "error": None,
        "traceback": None,
    }


def save_meta(path: Path, meta: dict[str, Any]) -> bool:
    """Write ``meta`` to ``path`` however the disk allows: atomically, else (no room for a
    temporary file) over the blocks the file already has, compact and without the traceback,
    then only its essential keys, the error cut to fit. Returns whether it was written."""
    try:
        atomic_write_json(path, meta)
        return True
    except OSError:
        pass
    try:
        size = path.stat().st_size
        compact = {k: v for k, v in meta.items()
                   if k not in ("traceback", "about", "children", "warnings", "argv")}
        data = json.dumps(to_jsonable(compact), separators=(",", ":")).encode()
        if len(data) > size:
            small = {k: meta.get(k) for k in ESSENTIAL}
            data = json.dumps(to_jsonable(small), separators=(",", ":")).encode()
            if len(data) > size:
                cut = max(0, len(str(small["error"])) - (len(data) - size) - 8)
                small["error"] = str(small["error"])[:cut] + "..."
                data = json.dumps(to_jsonable(small), separators=(",", ":")).encode()
        with path.open("r+b") as fh:  # over the existing blocks: needs no new space
            fh.write(data)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
        return True
    except OSError:
        return False
