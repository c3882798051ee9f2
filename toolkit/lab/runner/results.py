"""Run directories: atomic file writes, collision-free run ids, and reading results back.

A run writes ``<output_dir>/<experiment>/<run_id>/``::

    config.toml     the resolved config (runnable again with `toolkit run`)
    meta.json       status (running|complete|failed|interrupted; read back as abandoned when a
                    run says running but its process is gone), versions, seed, argv, timings
    metrics.jsonl   one JSON object per logged step: {"step": 3, "blocked/train/loss": 0.1, ...}
    summary.json    final numbers, blocked and unblocked side by side (deterministic)
    costs.json      measured, machine-dependent numbers (seconds, bytes, speed ratios)
    artifacts/      extra arrays and JSON for figures (<name>.json or <name>.npz)
    figures/*.png   drawn by toolkit.lab.report from the files above
    report.html     self-contained report (images embedded), plus report.md

:class:`RunResults` reads these files; it is what an experiment's ``figures(run)`` receives.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolkit._utils.formatting import shown
from toolkit.lab.runner import tomlio
from toolkit.lab.runner.errors import DamagedFile
from toolkit.lab.runner.liveness import abandoned_reason

__all__ = [
    "MAX_FILE_BYTES",
    "OutsideFolder",
    "RunResults",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "confined",
    "find_runs",
    "inside",
    "new_run_dir",
    "read_bytes",
    "read_json",
    "read_json_value",
    "read_metrics",
    "read_npz",
    "read_toml",
    "to_jsonable",
]


# ----------------------------------------------------------------------------- the folder's bounds
# Everything read back is hostile: a results folder from someone else may hold symbolic links
# anywhere. The lab writes, deletes and reads only inside the folder it works in; a path that
# resolves outside it (through a link, or ``..``) is refused, naming the link.


class OutsideFolder(DamagedFile):
    """A path the lab would write, delete or read that resolves outside its folder (through a
    symbolic link, or ``..``). ``path`` is the link (or the path, when no link is to blame)."""


def _link_out(root: Path, path: Path, base: Path) -> tuple[Path, str]:
    """The first symbolic link on the way from ``root`` to ``path`` that leads outside
    ``base`` (the resolved root), with the problem in words."""
    start, full = Path(os.path.abspath(root)), Path(os.path.abspath(path))
    if full.is_relative_to(start):
        at = start
        for part in full.relative_to(start).parts:
            at = at / part
            if at.is_symlink():
                try:
                    target = os.readlink(at)
                except OSError:
                    target = "?"
                if not at.resolve().is_relative_to(base):
                    return at, (f"a symbolic link to {shown(target)}, outside {shown(root)}; "
                                f"the lab writes, deletes and reads only inside its folder: "
                                f"remove the link (or copy what it points to into the folder)")
    return path, (f"lies outside {shown(root)}; the lab writes, deletes and reads only inside "
                  f"its folder")


def inside(root: str | Path, path: str | Path) -> Path:
    """``path`` resolved, when it lies inside the folder ``root`` (``root`` itself may be a
    link: it is resolved too); else :class:`OutsideFolder` naming the link that leads out.

    Call it on every path the lab writes, deletes or reads in a folder it was handed, before
    touching it: ``inside(run_dir, run_dir / "figures")`` before writing figures there, and
    ``inside(folder, old)`` before ``old.unlink()``.

    >>> import tempfile; from pathlib import Path
    >>> run = Path(tempfile.mkdtemp()); (run / "figures").symlink_to(tempfile.gettempdir())
    >>> inside(run, run / "summary.json") == (run / "summary.json").resolve()
    True
    >>> inside(run, run / "figures" / "a.png")
    Traceback (most recent call last):
    ...
    toolkit.lab.runner.results.OutsideFolder: .../figures: a symbolic link to ... outside ...
    """
    base = Path(root).resolve()
    resolved = Path(path).resolve()
    if resolved.is_relative_to(base):
        return resolved
    raise OutsideFolder(*_link_out(Path(root), Path(path), base))


_BOUNDS: contextvars.ContextVar[Path | None] = contextvars.ContextVar("results_bounds",
                                                                      default=None)


@contextlib.contextmanager
def confined(root: str | Path) -> Iterator[Path]:
    """Inside the ``with``, every atomic write (:func:`atomic_write_bytes` and the others that
    take no ``root``) and every :func:`new_run_dir` must land inside ``root``, or is refused
    with :class:`OutsideFolder`; context-local, so threads and other callers are unaffected.
    The runner runs each run confined to its output folder."""
    token = _BOUNDS.set(Path(root))
    try:
        yield Path(root)
    finally:
        _BOUNDS.reset(token)


# ----------------------------------------------------------------------------- writing


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def atomic_write_bytes(path: str | Path, data: bytes, *, root: str | Path | None = None
                       ) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace`` (all or nothing).

    An ``OSError`` (a full disk, a read-only folder) leaves ``path`` as it was, removes the
    temporary file and names ``path`` in its ``filename``. ``root``: the folder the file must
    land in (default: the one of :func:`confined`, if any); a path that leads outside it
    through a link is :class:`OutsideFolder`, and nothing is written.
    """
    path = Path(path)
    bound = root if root is not None else _BOUNDS.get()
    if bound is not None:
        inside(bound, path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, _FILE_MODE)  # mkstemp creates 0600; results are ordinary files
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
    """Convert tensors, numpy values, tuples, paths, dataclasses and models to plain JSON types."""
    import torch

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        return value.item() if value.numel() == 1 and value.dim() == 0 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v, f"{where}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, (Path, torch.dtype, torch.device)):
        return str(value)
    if hasattr(value, "model_dump"):
        return to_jsonable(value.model_dump(mode="json"), where)
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return to_jsonable(value.to_dict(), where)
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), where)
    raise TypeError(f"{where}: cannot store {type(value).__name__} as JSON; convert it to a "
                    f"number, string, list or dict first")


def dumps_json(obj: Any) -> str:
    """Canonical JSON of results files: 2-space indent, keys in insertion order, newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=True) + "\n"


def atomic_write_json(path: str | Path, obj: Any, *, root: str | Path | None = None) -> None:
    atomic_write_text(path, dumps_json(to_jsonable(obj, Path(path).name)), root=root)


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def new_run_dir(root: str | Path, experiment: str, seed: int, *, attempts: int = 20) -> Path:
    """Create ``<root>/<experiment>/<UTC time>__seed<k>__<random>`` atomically and return it.

    ``mkdir(exist_ok=False)`` either creates the directory or fails, so two runs (threads,
    processes or machines sharing a disk) never get the same directory; on a clash a new
    random suffix is drawn. A ``<root>/<experiment>`` that is a link leading outside ``root``
    (or outside the folder of :func:`confined`) is :class:`OutsideFolder`: nothing is made.
    """
    parent = Path(root) / experiment
    inside(root, parent)
    bound = _BOUNDS.get()
    if bound is not None:
        inside(bound, parent)
    parent.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
        run_dir = parent / f"{stamp}__seed{seed}__{secrets.token_hex(3)}"
        try:
            run_dir.mkdir(exist_ok=False)
        except FileExistsError:
            continue
        return run_dir
    raise FileExistsError(f"new_run_dir: could not create a fresh directory in {parent} after "
                          f"{attempts} attempts")


# ----------------------------------------------------------------------------- reading


#: The largest results file a reader takes (JSON, TOML, one ``metrics.jsonl``); larger is
#: damaged. Far above what a run writes (a long run's metrics are a few MiB).
MAX_FILE_BYTES = 256 * 2**20
#: The largest ``.npz`` artifact, and the most its arrays may hold once unpacked.
MAX_NPZ_BYTES = 2 * 2**30

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def _not_a_file(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"is {kind}, not a file"


def read_bytes(path: str | Path, *, root: str | Path | None = None,
               limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of a results file, or ``None`` when there is nothing at ``path``.

    :class:`DamagedFile` naming the file when it is a folder, a FIFO, a socket or a device
    (never opened: a FIFO would block), larger than ``limit``, or unreadable;
    :class:`OutsideFolder` when it (or a folder on its way) is a link leading outside ``root``.
    """
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise DamagedFile(path, f"cannot be read ({getattr(err, 'strerror', None) or err})") \
            from None
    if root is not None:
        inside(root, path)
    if stat.S_ISLNK(info.st_mode):
        try:
            info = os.stat(path)
        except OSError:
            raise DamagedFile(path, f"a symbolic link to {shown(os.readlink(path))}, which "
                                    f"leads nowhere") from None
    problem = _not_a_file(info.st_mode)
    if problem is None and info.st_size > limit:
        problem = f"holds {info.st_size:,} bytes, more than the {limit:,} a results file may"
    if problem is not None:
        raise DamagedFile(path, problem)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC",
                                                                                0))
        with os.fdopen(fd, "rb") as fh:
            problem = _not_a_file(os.fstat(fh.fileno()).st_mode)  # swapped since the lstat
            data = b"" if problem else fh.read(limit + 1)
    except OSError as err:
        raise DamagedFile(path, f"cannot be read ({err.strerror or err})") from None
    if problem is None and len(data) > limit:
        problem = f"holds more than the {limit:,} bytes a results file may"
    if problem is not None:
        raise DamagedFile(path, problem)
    return data


def _bounded(path: Path, value: Any) -> Any:
    """``value`` when it nests at most :data:`~toolkit.lab.schema.MAX_DEPTH` deep and its
    integers fit in 64 bits (walked without recursion); else :class:`DamagedFile`."""
    from toolkit.lab.schema import MAX_DEPTH

    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise DamagedFile(path, f"nests lists or objects more than {MAX_DEPTH} deep")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                  else item))
        elif isinstance(item, int) and not isinstance(item, bool) \
                and not -2**63 <= item < 2**64:
            raise DamagedFile(path, f"holds an integer of {len(str(abs(item)))} digits, beyond "
                                    f"64 bits")
    return value


def _decoded(path: Path, data: bytes, loads: Callable[[str], Any], kind: str,
             containers: str) -> Any:
    """``loads(data as UTF-8)``, depth and integers bounded; whatever fails (not UTF-8, too
    deep, a parse error, an integer of thousands of digits) is a :class:`DamagedFile`."""
    try:
        value = loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise DamagedFile(path, f"not UTF-8 text (byte {err.start} cannot be decoded)") from None
    except RecursionError:
        raise DamagedFile(path, f"nests {containers} too deep to read") from None
    except ValueError as err:  # the decoder's own error, or an integer of thousands of digits
        raise DamagedFile(path, f"not valid {kind} ({str(err)[:200]}); the file is cut short "
                                f"or corrupt") from None
    return _bounded(path, value)


def _json_value(path: Path, data: bytes) -> Any:
    return _decoded(path, data, json.loads, "JSON", "lists or objects")


def _shape(path: Path, data: Any, model: Any) -> None:
    """:class:`DamagedFile` naming the first field of ``data`` that does not fit ``model``
    (a model of :mod:`toolkit.lab.schema`)."""
    from pydantic import ValidationError

    try:
        model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        what = f"{where!r}: {first['msg']}" if where else first["msg"]
        raise DamagedFile(path, f"{what[:300]} (the {model.__name__} shape of "
                                f"toolkit.lab.schema)") from None
    except RecursionError:
        raise DamagedFile(path, "nests lists or objects too deep to read") from None


def read_json_value(path: str | Path, *, root: str | Path | None = None,
                    limit: int = MAX_FILE_BYTES) -> Any:
    """Any JSON value (an artifact may be a list or a number); :class:`KeyError`-free:
    ``None`` when absent, :class:`DamagedFile` when it cannot be read (see :func:`read_json`)."""
    data = read_bytes(path, root=root, limit=limit)
    return None if data is None else _json_value(Path(path), data)


def read_json(path: str | Path, *, root: str | Path | None = None, model: Any = None
              ) -> dict[str, Any]:
    """A results JSON file as a dict (``{}`` when absent).

    :class:`DamagedFile` naming the file, whatever is wrong with it: cut short or corrupt, not
    UTF-8, not an object, nested deeper than :data:`~toolkit.lab.schema.MAX_DEPTH`, an integer
    beyond 64 bits, not of the shape of ``model`` (a model of :mod:`toolkit.lab.schema`), a
    folder or a FIFO in the file's place, too large, or (with ``root``) a link leading out of
    ``root``.
    """
    path = Path(path)
    data = read_bytes(path, root=root)
    if data is None:
        return {}
    value = _json_value(path, data)
    if not isinstance(value, dict):
        raise DamagedFile(path, f"holds a JSON {type(value).__name__}, not an object")
    if model is not None:
        _shape(path, value, model)
    return value


def read_toml(path: str | Path, *, root: str | Path | None = None, model: Any = None
              ) -> dict[str, Any]:
    """A results TOML file (``config.toml``) as a dict (``{}`` when absent); :class:`DamagedFile`
    when it cannot be read or parsed, or does not fit ``model`` (as :func:`read_json`)."""
    path = Path(path)
    data = read_bytes(path, root=root)
    if data is None:
        return {}
    value = _decoded(path, data, tomlio.loads, "TOML", "arrays or tables")
    if model is not None:
        _shape(path, value, model)
    return value


def read_metrics(path: str | Path, *, root: str | Path | None = None, complete: bool = False
                 ) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (``[]`` when absent), each checked against
    :class:`~toolkit.lab.schema.MetricsRow`.

    A last line cut short (no newline: a run killed in the middle of a write) is left out,
    unless the run says it completed (``complete``); any other line that is not a row is
    :class:`DamagedFile` naming the file and the line.
    """
    from toolkit.lab.schema import MetricsRow

    path = Path(path)
    data = read_bytes(path, root=root)
    if data is None:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DamagedFile(path, f"not UTF-8 text (byte {err.start} cannot be decoded)") from None
    lines = text.split("\n")
    cut_short = lines[-1] != ""  # the last write did not finish its line
    if cut_short and complete:
        raise DamagedFile(path, "its last line is cut short (no newline), yet the run says it "
                                "completed")
    rows = []
    for number, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            row = _json_value(path, line.encode("utf-8"))
        except DamagedFile as err:
            raise DamagedFile(path, f"line {number}: {err.problem}") from None
        if not isinstance(row, dict):
            raise DamagedFile(path, f"line {number} holds a JSON {type(row).__name__}, not a "
                                    f"row with an integer 'step'")
        try:
            _shape(path, row, MetricsRow)
        except DamagedFile as err:
            raise DamagedFile(path, f"line {number}: {err.problem}") from None
        rows.append(row)
    return rows


def read_npz(path: str | Path, *, root: str | Path | None = None,
             limit: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray] | None:
    """The arrays of an ``.npz`` artifact (``None`` when absent), loaded without pickles.

    Each array's header is read first: one that claims more bytes than its member holds, or
    members that unpack to more than ``limit``, are :class:`DamagedFile` before anything is
    allocated; so is anything :func:`numpy.load` refuses.
    """
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


class RunResults:
    """Read-only view of a run directory (or of one child of a showcase run).

    Attributes are loaded lazily from the files. ``metrics`` is the list of logged rows,
    ``metric(key)`` one series, ``summary``/``costs`` the JSON files, ``config`` the resolved
    config, ``params`` its ``[params]``, ``meta`` the status file, ``artifact(name)`` an artifact.

    A child view (``run.child(name)``) sees metric keys without the ``"<name>/"`` prefix, the
    summary/costs nested under ``name`` and the artifacts in ``artifacts/<name>/``.

    ``replicates``: the runs of the same config with other seeds, this one first (a single run:
    ``[run]``). A report over seeds hands ``figures(run)`` the first seed's view with the others
    attached (:meth:`over_seeds`), so a figure can draw each seed or the spread across seeds.
    """

    def __init__(self, run_dir: str | Path, *, _child: str | None = None,
                 _replicates: tuple[Path, ...] = ()) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"RunResults: {self.run_dir} is not a run directory")
        self._child = _child
        self._replicates = tuple(Path(p) for p in _replicates)
        self._cache: dict[str, Any] = {}

    @classmethod
    def over_seeds(cls, run_dirs: Sequence[str | Path]) -> RunResults:
        """The first run's view with the other runs (other seeds, same config) as replicates."""
        if not run_dirs:
            raise ValueError("RunResults.over_seeds: run_dirs is empty; give at least one run")
        first, *others = run_dirs
        return cls(first, _replicates=tuple(Path(p) for p in others))

    @property
    def replicates(self) -> list[RunResults]:
        """This run and its replicates (other seeds), in seed order of the group."""
        return [self, *(RunResults(p, _child=self._child) for p in self._replicates)]

    @property
    def seed(self) -> int:
        return int(self.meta.get("seed", 0))

    def __repr__(self) -> str:
        child = f", child={self._child!r}" if self._child else ""
        return f"RunResults({str(self.run_dir)!r}{child})"

    @classmethod
    def load(cls, run_dir: str | Path) -> RunResults:
        return cls(run_dir)

    def _cached(self, key: str, fn: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    # -- whole run
    @property
    def meta(self) -> dict[str, Any]:
        from toolkit.lab.schema import RunMeta

        return self._cached("meta", lambda: read_json(self.run_dir / "meta.json",
                                                      root=self.run_dir, model=RunMeta))

    @property
    def status(self) -> str:
        """``complete``, ``failed``, ``interrupted``, ``running``, or ``abandoned``: a run whose
        ``meta.json`` says ``running`` but whose process is gone (see
        :mod:`toolkit.lab.runner.liveness`; decided when read, nothing is written)."""
        status = str(self.meta.get("status", "unknown"))
        if status == "running" and self.abandoned_reason is not None:
            return "abandoned"
        return status

    @property
    def abandoned_reason(self) -> str | None:
        """Why a run that says ``running`` is abandoned (``None`` when it is not)."""
        def reason() -> str | None:
            if self.meta.get("status") != "running":
                return None
            return abandoned_reason(self.meta, self.run_dir / "meta.json")
        return self._cached("abandoned_reason", reason)

    @property
    def last_step(self) -> int | None:
        """The step of the last row in ``metrics.jsonl`` (``None`` when nothing was logged)."""
        rows = self.all_metrics
        return rows[-1].get("step") if rows else None

    def status_line(self) -> str:
        """The status in words: ``abandoned (its process 123 on host is gone; last logged step
        4)``, ``failed (ValueError: ...)``, ``complete``."""
        status = self.status
        why = self.abandoned_reason if status == "abandoned" else self.meta.get("error")
        if status == "complete":
            return status
        step = self.last_step
        logged = "nothing logged" if step is None else f"last logged step {step}"
        why = " ".join(str(why or "").split())
        return f"{status} ({why}; {logged})" if why else f"{status} ({logged})"

    @property
    def children(self) -> list[str]:
        """Names of the child runs (a showcase run), in the order they ran."""
        if self._child is not None:
            return []
        return list(self.meta.get("children", {}))

    def child(self, name: str) -> RunResults:
        if name not in self.children:
            raise KeyError(f"RunResults.child: no child {name!r} in {self.run_dir}; "
                           f"children: {self.children}")
        return RunResults(self.run_dir, _child=name, _replicates=self._replicates)

    @property
    def root_config(self) -> dict[str, Any]:
        from toolkit.lab.schema import RunConfigFile

        return self._cached("root_config", lambda: read_toml(
            self.run_dir / "config.toml", root=self.run_dir, model=RunConfigFile))

    # -- this view
    @property
    def config(self) -> dict[str, Any]:
        if self._child is None:
            return self.root_config
        info = self.meta.get("children", {}).get(self._child, {})
        config = {k: v for k, v in self.root_config.items() if k != "params"}
        config["experiment"] = info.get("experiment", self._child)
        for key in ("dtype", "disable_blocks"):
            if key in info:
                config[key] = info[key]
        config["params"] = info.get("params", {})
        return config

    @property
    def experiment(self) -> str:
        return str(self.config.get("experiment", ""))

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.config.get("params", {}))

    @property
    def all_metrics(self) -> list[dict[str, Any]]:
        return self._cached("all_metrics", lambda: read_metrics(self.run_dir / "metrics.jsonl",
                                                                root=self.run_dir))

    @property
    def metrics(self) -> list[dict[str, Any]]:
        """Logged rows, ``{"step": k, key: value, ...}``; a child view strips its prefix."""
        if self._child is None:
            return self.all_metrics

        def strip() -> list[dict[str, Any]]:
            prefix = f"{self._child}/"
            rows = []
            for row in self.all_metrics:
                values = {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix)}
                if values:
                    rows.append({"step": row.get("step"), **values})
            return rows
        return self._cached("metrics", strip)

    def metric_keys(self) -> list[str]:
        """Every metric key, in order of first appearance (``step`` excluded)."""
        keys: dict[str, None] = {}
        for row in self.metrics:
            for key in row:
                if key != "step":
                    keys.setdefault(key, None)
        return list(keys)

    def metric(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one metric as numpy arrays (``None``/missing values → NaN)."""
        steps, values = [], []
        for row in self.metrics:
            if key in row:
                steps.append(row.get("step", len(steps)))
                value = row[key]
                values.append(math.nan if value is None else value)
        if not steps:
            import difflib

            close = difflib.get_close_matches(key, self.metric_keys(), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"RunResults.metric: no metric {key!r} in {self.run_dir}{hint}")
        return np.asarray(steps), np.asarray(values, dtype=float)

    def _nested(self, name: str) -> dict[str, Any]:
        from toolkit.lab.schema import SummaryFile, summary_problem

        path = self.run_dir / f"{name}.json"
        model = SummaryFile if name == "summary" else None
        data = self._cached(name, lambda: read_json(path, root=self.run_dir, model=model))
        if self._child is None:
            return data
        value = data.get(self._child, {})
        value = value if isinstance(value, dict) else {}
        problem = summary_problem(value) if model is not None else None
        if problem is not None:  # a showcase child's part: the same shape as a whole run's
            raise DamagedFile(path, f"{self._child}: {problem}")
        return value

    @property
    def summary(self) -> dict[str, Any]:
        return self._nested("summary")

    @property
    def costs(self) -> dict[str, Any]:
        return self._nested("costs")

    @property
    def artifacts_dir(self) -> Path:
        base = self.run_dir / "artifacts"
        return base / self._child if self._child else base

    def artifact_names(self) -> list[str]:
        folder = self.artifacts_dir
        inside(self.run_dir, folder)
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.iterdir() if p.suffix in (".json", ".npz"))

    def artifact(self, name: str) -> Any:
        """A saved artifact: the JSON value, or a dict of numpy arrays for ``.npz``
        (:class:`DamagedFile` when it cannot be read)."""
        folder = self.artifacts_dir
        if os.path.lexists(folder / f"{name}.json"):
            return read_json_value(folder / f"{name}.json", root=self.run_dir)
        if os.path.lexists(folder / f"{name}.npz"):
            return read_npz(folder / f"{name}.npz", root=self.run_dir)
        raise KeyError(f"RunResults.artifact: no artifact {name!r} in {folder}; "
                       f"available: {self.artifact_names()}")


def find_runs(root: str | Path) -> Iterator[Path]:
    """Every run directory (a folder with ``meta.json``) below ``root``, sorted."""
    root = Path(root)
    if (root / "meta.json").is_file():
        yield root
        return
    for meta in sorted(root.rglob("meta.json")):
        yield meta.parent
