"""Live curves: with ``--tensorboard DIR`` every ``ctx.log`` row also goes to a
``SummaryWriter`` per variant in ``DIR/<experiment>/<run_id>/<variant>/``, the key
``"<variant>/<group>/<name>"`` as the tag ``"<group>/<name>"``, so that TensorBoard draws a
run's blocked and unblocked curves on one chart.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from toolkit._utils.lazy import install_line
from toolkit.lab.errors import ConfigError

__all__ = ["TensorBoardMirror", "check_tensorboard"]

_FOLDER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")  # one plain name, never ".."


def check_tensorboard(source: str = "--tensorboard") -> None:
    """Refuse live curves before any run starts when ``tensorboard`` is not installed."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise ConfigError(source, "", "live curves need the tensorboard package, which is not "
                          "installed", "install the optional packages: "
                          f"{install_line('tensorboard')}") from None


class TensorBoardMirror:
    """The writers of one run, each made on its variant's first value."""

    def __init__(self, folder: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder, self._make, self._writers = Path(folder), SummaryWriter, dict[str, Any]()

    def log(self, step: int, row: dict[str, Any], prefix: str = "") -> None:
        """Mirror one metrics row (``prefix``: a child's ``"<name>/"``, in front of its keys)."""
        for key, value in row.items():
            if key == "step" or value is None:
                continue
            variant, _, rest = key.removeprefix(prefix).partition("/")
            variant, tag = (variant, prefix + rest) if rest and _FOLDER.match(variant) else ("", key)
            if variant not in self._writers:  # flushed every few seconds: curves show live
                self._writers[variant] = self._make(str(self.folder / variant), flush_secs=5)
            self._writers[variant].add_scalar(tag, float(value), global_step=step)

    def close(self) -> None:
        with contextlib.ExitStack() as stack:
            for writer in self._writers.values():
                stack.callback(writer.close)
            self._writers = {}
