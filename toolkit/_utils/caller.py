"""Where a warning points: the first frame of the user's code, outside the toolkit.

A check deep inside an estimator (``fit`` → data checks → the range check) warns about the
user's call, not about the line of the toolkit that noticed; ``warnings.warn(...,
stacklevel=user_stacklevel())`` attributes it there, as ``warnings.warn``'s
``skip_file_prefixes`` does from Python 3.12 on. scikit-learn's frames are skipped too: its
``set_output`` wraps every ``transform``, and its pipelines and model selection call the
estimator on the user's behalf, so the user's own line is the one that asked.
"""

from __future__ import annotations

import os
import sys

__all__ = ["user_stacklevel"]

_TOOLKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _library_dirs() -> tuple[str, ...]:
    """The toolkit's directory and, when it is imported, scikit-learn's."""
    sklearn = sys.modules.get("sklearn")
    path = getattr(sklearn, "__file__", None)
    return (_TOOLKIT_DIR,) if path is None else (
        _TOOLKIT_DIR, os.path.dirname(os.path.abspath(path)) + os.sep)


def user_stacklevel(package_dir: str | None = None) -> int:
    """The ``stacklevel`` of the first frame outside ``package_dir`` (by default the toolkit
    and scikit-learn), seen from a ``warnings.warn`` called by this function's caller."""
    skipped = (package_dir,) if package_dir is not None else _library_dirs()
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(skipped):
        frame, level = frame.f_back, level + 1
    return level
