"""Live curves in TensorBoard: every metric a run logs, mirrored to TensorBoard event files.

With ``--tensorboard DIR`` (``tensorboard = "DIR"`` in a config) each ``ctx.log`` row also goes
to ``DIR/<experiment>/<run_id>/<variant>/``, written through ``torch.utils.tensorboard``'s
``SummaryWriter``: one writer per variant, so that ``tensorboard --logdir DIR`` draws the
blocked and unblocked curves of a run on the same chart, as two runs. A key
``"<variant>/<group>/<name>"`` becomes the tag ``"<group>/<name>"`` of the variant's writer (a
showcase's child keeps its name in front: ``"em_gmm/train/loglik"``); a key without a variant
goes to the run's own folder. ``metrics.jsonl`` stays the record: the event files are a view
of it, and nothing a run computes depends on them.

The writers are made in the process that runs the run (a pool's or a Dask cluster's worker:
they are never pickled), and flushed and closed when the run ends, whatever its end.
Needs the optional ``tensorboard`` package (``pip install -e ".[tensorboard]"``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from toolkit._utils.lazy import install_line
from toolkit.lab.errors import ConfigError

__all__ = ["EXTRA", "TensorBoardMirror", "check_tensorboard", "log_dir"]

#: How to install what ``--tensorboard`` needs.
EXTRA = install_line("tensorboard")
# a variant's folder: one plain name (never "." or ".."), else the key goes to the run's folder
_FOLDER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}$")


def check_tensorboard(source: str = "--tensorboard") -> None:
    """Refuse ``--tensorboard`` before any run starts when the ``tensorboard`` package is not
    installed (a :class:`~toolkit.lab.errors.ConfigError` naming the extra). Imports only the
    light ``tensorboard`` package, not torch."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise ConfigError(source, "", "live curves need the tensorboard package, which is not "
                          "installed", f"install the optional packages: {EXTRA}") from None


def log_dir(root: str | Path, experiment: str, run_id: str) -> Path:
    """The folder of one run's event files: ``root/<experiment>/<run_id>``."""
    return Path(root) / experiment / run_id


class TensorBoardMirror:
    """One ``SummaryWriter`` per variant of a run, made on the variant's first value.

    ``log(step, row, prefix)`` mirrors one ``metrics.jsonl`` row (``prefix``: a child's
    ``"<name>/"``, in front of every key of the row); ``close()`` flushes and closes every
    writer, once, and is safe to call again.
    """

    def __init__(self, folder: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder = Path(folder)
        self._make = SummaryWriter
        self._writers: dict[str, Any] = {}
        self.closed = False

    def _writer(self, variant: str) -> Any:
        writer = self._writers.get(variant)
        if writer is None:
            where = self.folder / variant if variant else self.folder
            # flushed every few seconds: curves show while the run goes on
            writer = self._writers[variant] = self._make(log_dir=str(where), flush_secs=5)
        return writer

    @staticmethod
    def split(key: str, prefix: str = "") -> tuple[str, str]:
        """``(variant, tag)`` of a logged key: ``"blocked/train/loss"`` → ``("blocked",
        "train/loss")``; with ``prefix`` ``"em_gmm/"``: ``("blocked", "em_gmm/train/loss")``;
        a key without a variant (one part, or a first part that is no plain folder name) →
        ``("", key)``.

        >>> TensorBoardMirror.split("em_gmm/unblocked/train/loglik", "em_gmm/")
        ('unblocked', 'em_gmm/train/loglik')
        """
        own = key[len(prefix):] if prefix and key.startswith(prefix) else key
        variant, sep, rest = own.partition("/")
        if not sep or not rest or not _FOLDER.match(variant):
            return "", key
        return variant, prefix + rest

    def log(self, step: int, row: dict[str, Any], prefix: str = "") -> None:
        """Mirror the numbers of one logged row (``None``: not logged at this step)."""
        if self.closed:
            return
        for key, value in row.items():
            if key == "step" or value is None:
                continue
            variant, tag = self.split(key, prefix)
            self._writer(variant).add_scalar(tag, float(value), global_step=step)

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        """Flush and close every writer (each tried, the first error raised after)."""
        if self.closed:
            return
        self.closed = True
        first: BaseException | None = None
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception as err:  # a full disk: close the others, then say so
                first = first or err
        if first is not None:
            raise first

