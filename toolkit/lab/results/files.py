"""Results files on disk: written whole (a temporary file and ``os.replace``), read as hostile
input (a regular file of bounded size, nesting and integers, inside its folder, the shape its
model says; an ``.npz`` without pickles): whatever is wrong is one
:class:`~toolkit.lab.errors.DamagedFile` naming the file."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import io
import json
import math
import os
import secrets
import stat
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from toolkit._utils.formatting import shown
from toolkit.lab.errors import DamagedFile, OutsideFolder
from toolkit.lab.results.schema import MAX_DEPTH, MetricsRow, shape_problem

M = TypeVar("M", bound=BaseModel)

#: The largest results file a reader takes, and an ``.npz`` (unpacked too)
MAX_FILE_BYTES, MAX_NPZ_BYTES = 256 * 2**20, 2 * 2**30
#: How deep a walk goes below its folder (a run's files: <run>/artifacts/<child>/<file>).
MAX_WALK_DEPTH = 8
_ONLY_INSIDE = "the lab writes, deletes and reads only inside its folder"


def inside(root: str | Path, path: str | Path) -> Path:
    """``path`` resolved, if inside ``root``; else ``OutsideFolder`` naming the link out."""
    base, resolved = Path(root).resolve(), Path(path).resolve()
    if resolved.is_relative_to(base):
        return resolved
    start, at = Path(os.path.abspath(root)), Path(os.path.abspath(path))
    if at.is_relative_to(start):
        for part in at.relative_to(start).parts:
            start = start / part
            if start.is_symlink() and not start.resolve().is_relative_to(base):
                raise OutsideFolder(start, f"a symbolic link to {shown(os.readlink(start))}, "
                                           f"outside {shown(root)}; {_ONLY_INSIDE}: remove the "
                                           f"link (or copy what it points to into the folder)")
    raise OutsideFolder(path, f"lies outside {shown(root)}; {_ONLY_INSIDE}")


_BOUNDS: contextvars.ContextVar[Path | None] = contextvars.ContextVar("bounds", default=None)


@contextlib.contextmanager
def confined(root: str | Path) -> Iterator[Path]:
    """Inside the ``with``, every atomic write and :func:`new_run_dir` stays in ``root``."""
    token = _BOUNDS.set(Path(root))
    try:
        yield Path(root)
    finally:
        _BOUNDS.reset(token)


def _bound(path: Path, root: str | Path | None) -> None:
    for bound in (root, _BOUNDS.get()):
        if bound is not None:
            inside(bound, path)


_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | Path, data: bytes, *, root: str | Path | None = None
                       ) -> None:
    """Write ``data`` all or nothing: an ``OSError`` leaves ``path`` as it was."""
    path = Path(path)
    _bound(path, root)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are ordinary files
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(err, OSError) and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def atomic_write_text(path: str | Path, text: str, *, root: str | Path | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), root=root)


def _plain(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = value.float() if value.dtype in (torch.bfloat16, torch.float16) else value
        return value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} as JSON; convert it to a number, "
                    f"string, list or dict first")


def to_jsonable(value: Any, where: str = "value") -> Any:
    """Tensors, numpy values, tuples, paths, dataclasses and models as plain JSON types."""
    try:
        return to_jsonable_python(value, fallback=_plain)
    except TypeError as err:
        raise TypeError(f"{where}: {err}") from None


def atomic_write_json(path: str | Path, obj: Any, *, root: str | Path | None = None) -> None:
    """``obj`` as the results files' JSON: 2-space indent, keys in insertion order, a newline."""
    obj = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else to_jsonable(obj)
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=True) + "\n",
                      root=root)


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def new_run_dir(root: str | Path, experiment: str, seed: int | str) -> Path:
    """Make ``<root>/<experiment>/<UTC time>__seed<k>__<random>``, a new folder."""
    parent = Path(root) / experiment
    _bound(parent, root)
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        run_dir = parent / f"{utc_now():%Y%m%dT%H%M%SZ}__seed{seed}__{secrets.token_hex(3)}"
        with contextlib.suppress(FileExistsError):
            run_dir.mkdir()
            return run_dir


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"))


def read_bytes(path: str | Path, *, root: str | Path | None = None,
               limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of a results file (``None``: nothing at ``path``); damaged when not a regular
    file (never opened), larger than ``limit``, unreadable, or outside ``root``."""
    path = Path(path)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise DamagedFile(path, f"cannot be read ({getattr(err, 'strerror', None) or err})"
                          ) from None
    if root is not None:
        inside(root, path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "a device")
            raise DamagedFile(path, f"is {kind}, not a file")
        if info.st_size > limit:
            raise DamagedFile(path, f"holds {info.st_size:,} bytes, more than the {limit:,} a "
                                    f"results file may")
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise DamagedFile(path, "a symbolic link that leads nowhere") from None
    except OSError as err:
        raise DamagedFile(path, f"cannot be read ({err.strerror or err})") from None
    if len(data) > limit:  # grown since the stat
        raise DamagedFile(path, f"holds more than the {limit:,} bytes a results file may")
    return data


def _parsed(path: Path, data: bytes) -> Any:
    """``data`` parsed (TOML for ``.toml``, else JSON), at most :data:`MAX_DEPTH` deep, its
    integers within 64 bits."""
    kind, loads = ("TOML", tomllib.loads) if path.suffix == ".toml" else ("JSON", json.loads)
    try:
        value = loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise DamagedFile(path, f"not UTF-8 text (byte {err.start} cannot be decoded)") from None
    except RecursionError:
        raise DamagedFile(path, "nests lists or tables too deep to read") from None
    except ValueError as err:  # the decoder's error, or an integer of thousands of digits
        raise DamagedFile(path, f"not valid {kind} ({str(err)[:200]}); the file is cut short "
                                f"or corrupt") from None
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise DamagedFile(path, f"nests lists or objects more than {MAX_DEPTH} deep")
            stack += [(v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)]
        elif isinstance(item, int) and not -2**63 <= item < 2**64:
            raise DamagedFile(path, f"holds an integer of {len(str(abs(item)))} digits, beyond "
                                    f"64 bits")
    return value


def _shape(path: Path, data: Any, model: type[M]) -> M:
    """``data`` as ``model``, or :class:`~toolkit.lab.errors.DamagedFile` naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise DamagedFile(path, shape_problem(model, err)) from None


def read_json_value(path: str | Path, *, root: str | Path | None = None) -> Any:
    """Any JSON value (an artifact may be a list or a number); ``None`` when absent."""
    data = read_bytes(path, root=root)
    return None if data is None else _parsed(Path(path), data)


def read_json(path: str | Path, *, root: str | Path | None = None,
              model: type[BaseModel] | None = None) -> dict[str, Any]:
    """A results object, TOML for ``.toml`` or JSON (``{}`` when absent), of ``model``'s shape."""
    value = read_json_value(path, root=root)
    value = {} if value is None else value
    if not isinstance(value, dict):  # a TOML document is always a table
        raise DamagedFile(path, f"holds a JSON {type(value).__name__}, not an object")
    if model is not None:
        _shape(Path(path), value, model)
    return value


def read_record(path: str | Path, model: type[M], *, root: str | Path | None = None
                ) -> M | None:
    """A results file (TOML for ``.toml``, else JSON) as ``model``; ``None`` when absent."""
    path = Path(path)
    return _shape(path, read_json(path, root=root), model) if os.path.lexists(path) else None


def read_metrics(path: str | Path, *, root: str | Path | None = None, complete: bool = False
                 ) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (``[]`` when absent); a last line cut short (a run killed
    mid write) is left out, unless the run says it completed (``complete``)."""
    path = Path(path)
    lines = (read_bytes(path, root=root) or b"").split(b"\n")
    if lines[-1] and complete:
        raise DamagedFile(path, "its last line is cut short (no newline), yet the run says it "
                                "completed")
    rows = []
    for number, line in enumerate(lines[:-1], 1):
        if line.strip():
            try:
                rows.append(_parsed(path, line))
                _shape(path, rows[-1], MetricsRow)
            except DamagedFile as err:
                raise DamagedFile(path, f"line {number}: {err.problem}") from None
    return rows


def read_npz(path: str | Path, *, root: str | Path | None = None,
             limit: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray] | None:
    """The arrays of an ``.npz`` (``None``: absent), no pickles, headers checked first."""
    path = Path(path)
    data = read_bytes(path, root=root, limit=limit)
    if data is None:
        return None
    fmt = np.lib.format
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if sum(m.file_size for m in archive.infolist()) > limit:
                raise DamagedFile(path, f"unpacks to more than {limit:,} bytes")
            for member in archive.infolist():
                with archive.open(member) as fh:
                    header = {(1, 0): fmt.read_array_header_1_0}.get(
                        fmt.read_magic(fh), fmt.read_array_header_2_0)
                    shape, _, dtype = header(fh)
                if (size := math.prod(shape) * dtype.itemsize) > member.file_size:
                    raise DamagedFile(path, f"{member.filename} claims {size:,} bytes of data "
                                            f"but holds {member.file_size:,}")
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {key: arrays[key] for key in arrays.files}
    except DamagedFile:
        raise
    except Exception as err:  # zipfile, numpy: whatever a damaged archive raises
        raise DamagedFile(path, f"not a readable .npz ({type(err).__name__}: "
                                f"{str(err)[:200]})") from None


def walk(root: str | Path, depth: int = MAX_WALK_DEPTH
         ) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk`` sorted, at most ``depth`` levels down, links never entered."""
    for top, dirs, files in os.walk(root):
        dirs.sort()
        files.sort()
        yield Path(top), dirs, files
        if len(Path(top).relative_to(root).parts) >= depth:
            dirs[:] = []
