"""Results files on disk: written all at once, read as hostile input, never outside their folder.

Writing: :func:`atomic_write_bytes` (and ``_text``, ``_json``) writes through a temporary file
and ``os.replace``: a file is whole or as it was. :func:`new_run_dir` makes a run directory no
other run can get.

Reading: a results folder may come from anyone. :func:`read_bytes` never opens a FIFO, a device
or a folder in a file's place, reads at most :data:`MAX_FILE_BYTES`, and with ``root`` refuses a
path that resolves outside it (:func:`inside`); :func:`read_json`, :func:`read_toml` and
:func:`read_metrics` bound the nesting and the integers, and check the shape against a model of
:mod:`toolkit.lab.results.schema`; :func:`read_npz` loads no pickle and believes no header.
Whatever is wrong is one :class:`~toolkit.lab.errors.DamagedFile` naming the file.
:func:`walk` lists a folder's tree to a bounded depth, without following links.
"""

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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from toolkit._utils.formatting import shown
from toolkit.lab.errors import DamagedFile, OutsideFolder
from toolkit.lab.results.schema import MAX_DEPTH, MetricsRow

M = TypeVar("M", bound=BaseModel)
__all__ = ["MAX_FILE_BYTES", "atomic_write_bytes", "atomic_write_json", "atomic_write_text",
           "confined", "inside", "json_text", "new_run_dir", "read_bytes", "read_json",
           "read_json_value", "read_metrics", "read_npz", "read_record", "read_toml", "to_jsonable",
           "utc_now", "walk"]

#: The largest results file a reader takes (a long run's metrics are a few MiB).
MAX_FILE_BYTES = 256 * 2**20
#: The largest ``.npz`` artifact, and the most its arrays may hold once unpacked.
MAX_NPZ_BYTES = 2 * 2**30
#: The deepest a walk goes below the folder it starts in (a run's files are 3 levels down
#: from an experiment's folder: <run>/artifacts/<child>/<file>).
MAX_WALK_DEPTH = 8

# ----------------------------------------------------------------------------- the folder's bounds


def inside(root: str | Path, path: str | Path) -> Path:
    """``path`` resolved, when it lies inside the folder ``root`` (itself resolved: it may be a
    link); else :class:`~toolkit.lab.errors.OutsideFolder` naming the link that leads out.

    >>> import tempfile; from pathlib import Path
    >>> run = Path(tempfile.mkdtemp()); (run / "figures").symlink_to(tempfile.gettempdir())
    >>> inside(run, run / "summary.json") == (run / "summary.json").resolve()
    True
    >>> inside(run, run / "figures" / "a.png")
    Traceback (most recent call last):
    ...
    toolkit.lab.errors.OutsideFolder: .../figures: a symbolic link to ... outside ...
    """
    base, resolved = Path(root).resolve(), Path(path).resolve()
    if resolved.is_relative_to(base):
        return resolved
    start, full = Path(os.path.abspath(root)), Path(os.path.abspath(path))
    if full.is_relative_to(start):
        at = start
        for part in full.relative_to(start).parts:
            at = at / part
            if at.is_symlink() and not at.resolve().is_relative_to(base):
                raise OutsideFolder(at, f"a symbolic link to {shown(os.readlink(at))}, outside "
                                        f"{shown(root)}; the lab writes, deletes and reads only "
                                        f"inside its folder: remove the link (or copy what it "
                                        f"points to into the folder)")
    raise OutsideFolder(path, f"lies outside {shown(root)}; the lab writes, deletes and reads "
                              f"only inside its folder")


_BOUNDS: contextvars.ContextVar[Path | None] = contextvars.ContextVar("bounds", default=None)


@contextlib.contextmanager
def confined(root: str | Path) -> Iterator[Path]:
    """Inside the ``with``, every atomic write and :func:`new_run_dir` must land inside
    ``root``, or is refused with :class:`~toolkit.lab.errors.OutsideFolder` (context-local)."""
    token = _BOUNDS.set(Path(root))
    try:
        yield Path(root)
    finally:
        _BOUNDS.reset(token)


def _bound(path: Path, root: str | Path | None) -> None:
    for bound in (root, _BOUNDS.get()):
        if bound is not None:
            inside(bound, path)


# ----------------------------------------------------------------------------- writing

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | Path, data: bytes, *, root: str | Path | None = None
                       ) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace`` (all or nothing).

    An ``OSError`` (a full disk, a read-only folder) leaves ``path`` as it was, removes the
    temporary file and names ``path``. ``root`` (default: the folder of :func:`confined`): the
    folder the file must land in.
    """
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


def to_jsonable(value: Any, where: str = "value") -> Any:
    """Tensors, numpy values, tuples, paths, dataclasses and models as plain JSON types."""
    import dataclasses

    import torch

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = value.float() if value.dtype in (torch.bfloat16, torch.float16) else value
        return value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, f"{where}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, (Path, torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump(mode="json"), where)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), where)
    raise TypeError(f"{where}: cannot store {type(value).__name__} as JSON; convert it to a "
                    f"number, string, list or dict first")


def json_text(obj: Any) -> str:
    """The results files' JSON: 2-space indent, keys in insertion order, a final newline."""
    obj = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else to_jsonable(obj)
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=True) + "\n"


def atomic_write_json(path: str | Path, obj: Any, *, root: str | Path | None = None) -> None:
    atomic_write_text(path, json_text(obj), root=root)


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def new_run_dir(root: str | Path, experiment: str, seed: int | str) -> Path:
    """Make ``<root>/<experiment>/<UTC time>__seed<k>__<random>`` and return it: ``mkdir``
    without ``exist_ok`` never gives two runs one folder (a clash draws a new suffix)."""
    parent = Path(root) / experiment
    inside(root, parent)
    _bound(parent, None)
    parent.mkdir(parents=True, exist_ok=True)
    stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
    for _ in range(20):
        run_dir = parent / f"{stamp}__seed{seed}__{secrets.token_hex(3)}"
        try:
            run_dir.mkdir()
        except FileExistsError:
            continue
        return run_dir
    raise FileExistsError(f"new_run_dir: no fresh folder in {parent} after 20 attempts")


# ----------------------------------------------------------------------------- reading

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def _not_a_file(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return f"is {next((name for test, name in _KINDS if test(mode)), 'not a regular file')}, " \
           f"not a file"


def read_bytes(path: str | Path, *, root: str | Path | None = None,
               limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of a results file, ``None`` when there is nothing at ``path``; a
    :class:`~toolkit.lab.errors.DamagedFile` when it is a folder, a FIFO, a socket or a device
    (never opened), larger than ``limit`` or unreadable, or (with ``root``) leads outside it."""
    path = Path(path)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise DamagedFile(path, f"cannot be read ({getattr(err, 'strerror', None) or err})") \
            from None
    if root is not None:
        inside(root, path)
    try:  # the kind first: a FIFO or a device is never opened
        problem = _not_a_file(os.stat(path).st_mode)
        if problem is not None:
            raise DamagedFile(path, problem)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as fh:
            info = os.fstat(fh.fileno())  # swapped since the stat: checked again
            problem = _not_a_file(info.st_mode) or (
                f"holds {info.st_size:,} bytes, more than the {limit:,} a results file may"
                if info.st_size > limit else None)
            data = b"" if problem else fh.read(limit + 1)
    except FileNotFoundError:
        raise DamagedFile(path, "a symbolic link that leads nowhere") from None
    except OSError as err:
        raise DamagedFile(path, f"cannot be read ({err.strerror or err})") from None
    if problem is None and len(data) > limit:
        problem = "holds more bytes than a results file may"
    if problem is not None:
        raise DamagedFile(path, problem)
    return data


def _bounded(path: Path, value: Any) -> Any:
    """``value`` when it nests at most :data:`MAX_DEPTH` deep and its integers fit in 64 bits
    (walked without recursion); else :class:`~toolkit.lab.errors.DamagedFile`."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise DamagedFile(path, f"nests lists or objects more than {MAX_DEPTH} deep")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                  else item))
        elif isinstance(item, int) and not -2**63 <= item < 2**64:
            raise DamagedFile(path, f"holds an integer of {len(str(abs(item)))} digits, beyond "
                                    f"64 bits")
    return value


def _decoded(path: Path, data: bytes, loads: Callable[[str], Any], kind: str) -> Any:
    try:
        return _bounded(path, loads(data.decode("utf-8")))
    except UnicodeDecodeError as err:
        raise DamagedFile(path, f"not UTF-8 text (byte {err.start} cannot be decoded)") from None
    except RecursionError:
        raise DamagedFile(path, "nests lists or tables too deep to read") from None
    except ValueError as err:  # the decoder's error, or an integer of thousands of digits
        if isinstance(err, DamagedFile):
            raise
        raise DamagedFile(path, f"not valid {kind} ({str(err)[:200]}); the file is cut short "
                                f"or corrupt") from None


def _shape(path: Path, data: Any, model: type[BaseModel]) -> BaseModel:
    """``data`` validated as ``model``; :class:`~toolkit.lab.errors.DamagedFile` naming the
    first field that does not fit."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        what = f"{where!r}: {first['msg']}" if where else first["msg"]
        raise DamagedFile(path, f"{what[:300]} (the {model.__name__} shape of the results "
                                f"format)") from None
    except RecursionError:
        raise DamagedFile(path, "nests lists or objects too deep to read") from None


def read_json_value(path: str | Path, *, root: str | Path | None = None) -> Any:
    """Any JSON value (an artifact may be a list or a number); ``None`` when absent."""
    data = read_bytes(path, root=root)
    return None if data is None else _decoded(Path(path), data, json.loads, "JSON")


def read_json(path: str | Path, *, root: str | Path | None = None,
              model: type[BaseModel] | None = None) -> dict[str, Any]:
    """A results JSON object (``{}`` when absent), checked against ``model`` when given."""
    path = Path(path)
    value = read_json_value(path, root=root)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DamagedFile(path, f"holds a JSON {type(value).__name__}, not an object")
    if model is not None:
        _shape(path, value, model)
    return value


def read_record(path: str | Path, model: type[M], *, root: str | Path | None = None
                ) -> M | None:
    """A results file as its model of :mod:`toolkit.lab.results.schema` (``None`` when
    absent): TOML for ``.toml``, else JSON."""
    path = Path(path)
    reader = read_toml if path.suffix == ".toml" else read_json
    if not os.path.lexists(path):
        return None
    return _shape(path, reader(path, root=root), model)  # type: ignore[return-value]


def read_toml(path: str | Path, *, root: str | Path | None = None,
              model: type[BaseModel] | None = None) -> dict[str, Any]:
    """A results TOML file (``config.toml``) as a dict (``{}`` when absent), checked against
    ``model`` when given."""
    path = Path(path)
    data = read_bytes(path, root=root)
    if data is None:
        return {}
    value = _decoded(path, data, tomllib.loads, "TOML")
    if model is not None:
        _shape(path, value, model)
    return value


def read_metrics(path: str | Path, *, root: str | Path | None = None, complete: bool = False
                 ) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (``[]`` when absent), each a
    :class:`~toolkit.lab.results.schema.MetricsRow`. A last line cut short (a run killed mid
    write) is left out, unless the run says it completed (``complete``)."""
    path = Path(path)
    data = read_bytes(path, root=root)
    if data is None:
        return []
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise DamagedFile(path, f"not UTF-8 text (byte {err.start} cannot be decoded)") from None
    if lines[-1] != "" and complete:
        raise DamagedFile(path, "its last line is cut short (no newline), yet the run says it "
                                "completed")
    rows = []
    for number, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            row = _decoded(path, line.encode("utf-8"), json.loads, "JSON")
            if not isinstance(row, dict):
                raise DamagedFile(path, f"holds a JSON {type(row).__name__}, not a row with an "
                                        f"integer 'step'")
            _shape(path, row, MetricsRow)
        except DamagedFile as err:
            raise DamagedFile(path, f"line {number}: {err.problem}") from None
        rows.append(row)
    return rows


def read_npz(path: str | Path, *, root: str | Path | None = None,
             limit: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray] | None:
    """The arrays of an ``.npz`` artifact (``None`` when absent), loaded without pickles; an
    array whose header claims more bytes than its member holds is damage before anything is
    allocated."""
    import zipfile

    path = Path(path)
    data = read_bytes(path, root=root, limit=limit)
    if data is None:
        return None
    fmt = np.lib.format
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if sum(m.file_size for m in members) > limit:
                raise DamagedFile(path, f"unpacks to more than {limit:,} bytes")
            for member in members:
                with archive.open(member) as fh:
                    version = fmt.read_magic(fh)
                    read_header = (fmt.read_array_header_1_0 if version == (1, 0)
                                   else fmt.read_array_header_2_0)
                    shape, _, dtype = read_header(fh)
                    if dtype.hasobject:
                        raise DamagedFile(path, f"{member.filename} holds Python objects "
                                                f"(a pickle), which are never loaded")
                    size = math.prod(shape) * dtype.itemsize
                    if size > member.file_size:
                        raise DamagedFile(path, f"{member.filename} claims {size:,} bytes of "
                                                f"data but holds {member.file_size:,}")
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {key: arrays[key] for key in arrays.files}
    except DamagedFile:
        raise
    except Exception as err:  # zipfile, numpy: whatever a damaged archive raises
        raise DamagedFile(path, f"not a readable .npz ({type(err).__name__}: "
                                f"{str(err)[:200]})") from None


def walk(root: str | Path, depth: int = MAX_WALK_DEPTH) -> Iterator[tuple[Path, list[str],
                                                                           list[str]]]:
    """``(folder, subfolders, files)`` below ``root``, sorted, at most ``depth`` levels down,
    without following links (a link is listed with the files): iterative, so a chain of
    thousands of folders costs no stack, and bounded, so it costs no time either."""
    stack = [(Path(root), 0)]
    while stack:
        folder, level = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        dirs = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        files = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
        yield folder, dirs, files
        if level < depth:
            stack.extend((folder / d, level + 1) for d in reversed(dirs))
