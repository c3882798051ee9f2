"""How close does each tolerance assertion of the test suite come to its tolerance?

    python scripts/tolerance_margins.py run margins/default.jsonl
    ATEN_CPU_CAPABILITY=default python scripts/tolerance_margins.py run margins/aten.jsonl -- tests/algorithms
    python scripts/tolerance_margins.py report margins/*.jsonl --within 3

``run OUT [-- PYTEST ARGS]`` runs the tests (all of ``tests/`` by default) with this module as a
pytest plugin, which records, for every tolerance assertion that a test evaluates, the observed
error as a fraction of the allowed one (the *ratio*: 0 is exact, 1 is on the tolerance, above 1
fails), and writes the worst ratio of each assertion site to ``OUT`` (JSON lines). The kernels,
seeds and threads are chosen by the environment as usual (``ATEN_CPU_CAPABILITY``,
``NPY_DISABLE_CPU_FEATURES``, ``OPENBLAS_CORETYPE``, ``TOOLKIT_TEST_SEED``,
``TOOLKIT_TEST_THREADS``), one file per environment. ``report FILE...`` merges such files (each
labelled by its name) and prints the sites whose worst ratio is at least ``1/within``.

What is measured, element by element, with the tolerance the call actually used:

- ``torch.testing.assert_close`` (its dtype-dependent defaults included), ``torch.allclose``,
  ``torch.isclose``, ``numpy.testing.assert_allclose`` (also as scikit-learn's
  ``assert_allclose``, whose defaults depend on the dtype), ``numpy.allclose``,
  ``numpy.isclose``: ``|actual - expected| / (atol + rtol |expected|)``;
- ``assert_almost_equal`` and ``assert_array_almost_equal`` (``decimal``):
  ``|actual - expected| / (1.5 10**-decimal)``; ``math.isclose``:
  ``|a - b| / max(rel_tol max(|a|, |b|), abs_tol)``; ``pytest.approx``: ``|actual - expected|
  / tolerance``;
- plain comparisons in ``assert`` statements (``assert err < 1e-6``, ``abs(a - b) <= tol``),
  through pytest's ``pytest_assertion_pass`` hook: ``left / right`` for ``<`` and ``<=``
  between non-negative numbers, when the bound is written as a tolerance (a literal, or a name
  with ``tol``/``eps``); a bound computed otherwise is an *ordering* (``loss[-1] < loss[0]``),
  and ``>``, ``>=`` are *lower bounds* (``right / left``): both are recorded, and reported
  only with ``--kinds all``;
- ``assert not allclose(...)``: the inverse ratio (how far the values stay apart), as a
  *negated* site.

A site is the line of test code (ours under ``tests/``, or scikit-learn's own test files and
``estimator_checks``) that made the call; calls made by library code are not counted. The
instrumentation costs a little time and is off unless this script runs the tests.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import linecache
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV_OUT = "TOOLKIT_MARGINS_OUT"
ENV_PYCACHE = "TOOLKIT_MARGINS_PYCACHE"
ENV_TESTS = "TOOLKIT_MARGINS_TESTS"  # the folder of the test code to measure (default tests/)
_SKIP_PARTS = ("/_pytest/", "/pluggy/", "/numpy/", "/torch/", "/contextlib.py", "/functools.py",
               "/sklearn/utils/_testing.py", "/tolerance_margins.py")
_state = threading.local()
_records: dict[tuple[str, int, str], dict[str, Any]] = {}
_current = {"nodeid": ""}
_sklearn_root: list[str] = []
_isclose = math.isclose  # this module's own use, never recorded


# --- measuring ----------------------------------------------------------------------------

def _as_float64(x: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().resolve_conj()
        x = x.to_dense() if x.layout != torch.strided else x
        return x.to(torch.complex128 if x.is_complex() else torch.float64).numpy()
    if hasattr(x, "toarray"):  # scipy sparse
        x = x.toarray()
    arr = np.asarray(x)
    if arr.dtype.kind not in "biufc":
        raise TypeError("not numeric")
    return arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64)


def _close_ratio(actual: Any, expected: Any, rtol: float, atol: float,
                 equal_nan: bool = True) -> tuple[float, float]:
    """Worst ``|a - e| / (atol + rtol |e|)`` and the worst absolute error."""
    import numpy as np

    a, e = np.broadcast_arrays(_as_float64(actual), _as_float64(expected))
    if a.size == 0:
        return 0.0, 0.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(a - e)
        allowed = atol + rtol * np.abs(e)
        ratio = np.where(diff == 0, 0.0, diff / allowed)
        finite = np.isfinite(a) & np.isfinite(e)
        same = (a == e) | (equal_nan & np.isnan(a) & np.isnan(e))
        ratio = np.where(finite, ratio, np.where(same, 0.0, np.inf))
        worst_abs = float(np.max(np.where(finite, diff, 0.0)))
    return float(np.max(ratio)), worst_abs


def _torch_default_tolerances(*values: Any) -> tuple[float, float]:
    import torch

    table = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
             torch.float32: (1.3e-6, 1e-5), torch.complex64: (1.3e-6, 1e-5),
             torch.float64: (1e-7, 1e-7), torch.complex128: (1e-7, 1e-7)}
    dtypes = [v.dtype if isinstance(v, torch.Tensor) else torch.as_tensor(v).dtype
              for v in values]
    tols = [table.get(d, (0.0, 0.0)) for d in dtypes]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def _pairs(actual: Any, expected: Any) -> list[tuple[Any, Any]]:
    """Leaf pairs of two nested structures (as ``torch.testing.assert_close`` walks them)."""
    from torch.utils._pytree import tree_flatten

    a_leaves = tree_flatten(actual)[0]
    e_leaves = tree_flatten(expected)[0]
    if len(a_leaves) != len(e_leaves):
        raise TypeError("structures differ")
    return list(zip(a_leaves, e_leaves))


def _measure(kind: str, bound: inspect.BoundArguments) -> tuple[float, float, str]:
    """(ratio, worst absolute error, the tolerance in words) of one call."""
    args = bound.arguments
    if kind == "torch.testing.assert_close":
        worst = (0.0, 0.0, "")
        for a, e in _pairs(args["actual"], args["expected"]):
            rtol, atol = args.get("rtol"), args.get("atol")
            if rtol is None or atol is None:
                rtol, atol = _torch_default_tolerances(a, e)
            r, w = _close_ratio(a, e, rtol, atol, args.get("equal_nan", False))
            if r >= worst[0]:
                worst = (r, w, f"rtol={rtol:g} atol={atol:g}")
        return worst
    if kind in ("assert_allclose", "np.allclose", "np.isclose", "torch.allclose",
                "torch.isclose"):
        first, second = list(args.values())[:2]
        rtol, atol = float(args.get("rtol", 1e-7)), float(args.get("atol", 0.0))
        r, w = _close_ratio(first, second, rtol, atol, bool(args.get("equal_nan", True)))
        return r, w, f"rtol={rtol:g} atol={atol:g}"
    if kind in ("assert_almost_equal", "assert_array_almost_equal"):
        first, second = list(args.values())[:2]
        allowed = 1.5 * 10.0 ** (-int(args.get("decimal", 7 if kind == "assert_almost_equal"
                                                     else 6)))
        r, w = _close_ratio(first, second, 0.0, allowed)
        return r, w, f"decimal={args.get('decimal')}"
    if kind == "math.isclose":
        a, b = float(args["a"]), float(args["b"])
        rel, abs_ = float(args.get("rel_tol", 1e-9)), float(args.get("abs_tol", 0.0))
        allowed = max(rel * max(abs(a), abs(b)), abs_)
        diff = abs(a - b)
        return (0.0 if diff == 0 else diff / allowed if allowed else math.inf), diff, \
            f"rel_tol={rel:g} abs_tol={abs_:g}"
    raise ValueError(f"tolerance_margins: unknown kind {kind!r}")


# --- recording ----------------------------------------------------------------------------

def _site(depth: int = 2) -> tuple[str, int, str] | None:
    """The test-code line that made the call, or None when library code made it."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename.replace(os.sep, "/")
        if not any(part in name for part in _SKIP_PARTS):
            return _site_name(name, frame.f_lineno)
        frame = frame.f_back
    return None


def _site_name(name: str, line: int) -> tuple[str, int, str] | None:
    """(the file as the report names it, the line, the file's own path) of test code."""
    tests = Path(os.environ.get(ENV_TESTS) or ROOT / "tests").resolve().as_posix() + "/"
    if name.startswith(tests):
        return "tests/" + name[len(tests):], line, name
    for root in _sklearn_root:
        if name.startswith(root) and ("/tests/" in name or name.endswith("estimator_checks.py")):
            return "sklearn/" + name[len(root):], line, name
    return None


def _record(site: tuple[str, int, str], kind: str, ratio: float, abs_err: float, tol: str,
            source: str | None = None) -> None:
    key = (site[0], site[1], kind)
    entry = _records.get(key)
    if entry is None:
        src = source if source is not None else linecache.getline(site[2], site[1]).strip()
        entry = _records[key] = {"file": site[0], "line": site[1], "kind": kind,
                                 "source": src[:200], "ratio": -1.0, "calls": 0, "over": 0}
    entry["calls"] += 1
    entry["over"] += ratio > 1
    if ratio > entry["ratio"]:
        entry.update(ratio=ratio, abs_err=abs_err, tolerance=tol, nodeid=_current["nodeid"])


_NEGATED = re.compile(r"\bnot\s+(?:np|numpy|torch)\.(?:allclose|isclose)\(")


def _wrap(kind: str, real: Any, signature: inspect.Signature) -> Any:
    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_state, "busy", False):
            return real(*args, **kwargs)
        _state.busy = True
        try:
            return real(*args, **kwargs)
        finally:  # a failing call is recorded too (its ratio is above 1)
            try:
                _observe(kind, signature, args, kwargs)
            finally:
                _state.busy = False

    return wrapper


def _observe(kind: str, signature: inspect.Signature, args: Any, kwargs: Any) -> None:
    site = _site(3)
    if site is None:
        return
    try:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        ratio, abs_err, tol = _measure(kind, bound)
    except (TypeError, ValueError):
        return  # an input this tool cannot read (strings, objects): not a tolerance
    if _NEGATED.search(linecache.getline(site[2], site[1])):
        # `assert not allclose(...)`: the margin is how far the values stay apart
        kind, ratio = kind + " (negated)", (1 / ratio if ratio else math.inf)
    _record(site, kind, ratio, abs_err, tol)


def _install() -> None:
    import numpy as np
    import numpy.testing
    import sklearn
    import sklearn.utils._testing as sk_testing
    import torch
    import torch.testing

    _sklearn_root.append(Path(sklearn.__file__).resolve().parent.as_posix() + "/")
    close_sig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     default=d) for n, d in
                                   (("input", inspect.Parameter.empty),
                                    ("other", inspect.Parameter.empty), ("rtol", 1e-5),
                                    ("atol", 1e-8), ("equal_nan", False))])
    isclose_sig = inspect.Signature([
        inspect.Parameter("a", inspect.Parameter.POSITIONAL_ONLY),
        inspect.Parameter("b", inspect.Parameter.POSITIONAL_ONLY),
        inspect.Parameter("rel_tol", inspect.Parameter.KEYWORD_ONLY, default=1e-9),
        inspect.Parameter("abs_tol", inspect.Parameter.KEYWORD_ONLY, default=0.0)])
    targets = [
        (torch.testing, "assert_close", "torch.testing.assert_close", None),
        (torch, "allclose", "torch.allclose", close_sig),
        (torch, "isclose", "torch.isclose", close_sig),
        (np, "allclose", "np.allclose", None), (np, "isclose", "np.isclose", None),
        (math, "isclose", "math.isclose", isclose_sig),
        (numpy.testing, "assert_allclose", "assert_allclose", None),
        (numpy.testing, "assert_almost_equal", "assert_almost_equal", None),
        (numpy.testing, "assert_array_almost_equal", "assert_array_almost_equal", None),
        (sk_testing, "np_assert_allclose", "assert_allclose", None),
        (sk_testing, "assert_almost_equal", "assert_almost_equal", None),
        (sk_testing, "assert_array_almost_equal", "assert_array_almost_equal", None),
    ]
    for module, attr, kind, sig in targets:
        real = getattr(module, attr)
        setattr(module, attr, _wrap(kind, real, sig or inspect.signature(real)))

    try:
        import _pytest.approx as approx_module
    except ImportError:  # pytest < 8.4
        import _pytest.python_api as approx_module
    real_eq = approx_module.ApproxScalar.__eq__

    def approx_eq(self: Any, actual: Any) -> bool:
        result = real_eq(self, actual)
        if getattr(_state, "busy", False) or approx_module._as_numpy_array(actual) is not None:
            return result
        try:
            diff, tol = abs(self.expected - actual), self.tolerance
            ratio = 0.0 if diff == 0 else float(diff / tol) if tol else math.inf
        except (TypeError, ValueError, ArithmeticError):
            return result
        site = _site()
        if site is not None and math.isfinite(abs(self.expected)):
            _record(site, "pytest.approx", ratio, float(diff), f"tolerance={float(tol):g}")
        return result

    approx_module.ApproxScalar.__eq__ = approx_eq


# --- plain comparisons in assert statements -----------------------------------------------

_NUM = r"-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)"
# a number as pytest shows it: 1e-06, np.float64(1e-06), tensor(1.0000e-06, dtype=torch.float64)
_VAL = (r"(?<![\w.])(?:(?:tensor|np\.\w+)\()?(" + _NUM + r")(?:\)|,(?:[^()<>]|<\w+>)*\))?")
_COMPARE = re.compile(_VAL + r"\s*(<=|<|>=|>)\s*(?=" + _VAL + ")")
_LITERAL = re.compile(r"(?<![\w.])\d+\.?\d*(?:e[-+]?\d+)?")


def _comparisons(expl: str) -> list[tuple[float, str, float]]:
    """The ``number op number`` comparisons in the first line of a passing assertion's text,
    leaving out those with an integer bound (counts and sizes, not tolerances)."""
    first = expl.splitlines()[0] if expl else ""
    found = []
    for m in _COMPARE.finditer(first):
        right = re.match(_VAL, first[m.end():])
        bound = right.group(1) if right is not None else ""
        before = first[:m.start()].rstrip()
        after = first[m.end() + (right.end() if right else 0):].lstrip()
        # whole operands only: not the 2 of "(x / 2) < 0.02", nor the 1e-5 of "< 1e-5 * s"
        operator = before[-1:] in set("+-*/%@") or after[:1] in set("+-*/%@")
        if any(c in bound for c in ".ein") and not operator:
            found.append((float(m.group(1)), m.group(2), float(bound)))
    return found


def _is_tolerance(orig: str, bound: float) -> bool:
    """Does the assertion compare with a written tolerance (a literal equal to the bound, a
    literal in e-notation, or a name saying so), rather than with another computed value?"""
    literals = [float(t) for t in _LITERAL.findall(orig)]
    return (any(_isclose(v, bound, rel_tol=1e-9) for v in literals)
            or re.search(r"\de-?\d|tol|eps|finfo", orig) is not None)


def pytest_assertion_pass(item: Any, lineno: int, orig: str, expl: str) -> None:
    """Plain ``<``/``>`` comparisons between numbers: the observed side over the allowed one."""
    site = _site(1)
    if site is None:
        return
    for left, op, right in _comparisons(expl):
        if op in "<=" and left >= 0 and right > 0:
            kind = "assert <" if _is_tolerance(orig, right) else "assert < (ordering)"
            _record(site, kind, left / right, left, f"< {right:g}", orig)
        elif op in ">=" and right > 0 and left > 0:
            _record(site, "assert > (lower bound)", right / left, left, f"> {right:g}", orig)


# --- pytest hooks -------------------------------------------------------------------------

def pytest_configure(config: Any) -> None:
    # the test modules are rewritten with the pass hook compiled in: their bytecode goes apart
    # from the usual cache (which holds them without it). Only theirs: every other module, and
    # the subprocesses that tests start, keep the usual cache of the installed packages (a
    # prefix for all of them compiled torch anew on every run, some 25 s).
    if os.environ.get(ENV_PYCACHE):
        _rewritten_apart(Path(os.environ[ENV_PYCACHE]))
    _install()


def _rewritten_apart(prefix: Path) -> None:
    """The modules pytest rewrites cache their bytecode under ``prefix`` (as under
    ``sys.pycache_prefix``); where this pytest has no such hook, every module does."""
    from _pytest.assertion import rewrite

    if not callable(getattr(rewrite, "get_cache_dir", None)):
        sys.pycache_prefix = str(prefix)
        return
    rewrite.get_cache_dir = lambda file_path: prefix / Path(*file_path.parts[1:-1])


def pytest_runtest_protocol(item: Any, nextitem: Any) -> None:
    _current["nodeid"] = item.nodeid


def pytest_runtest_logreport(report: Any) -> None:
    if hasattr(report, "wasxfail"):
        _current["xfail"] = report.nodeid


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    """Append what this test recorded (a killed or hung run keeps what it measured); an
    expected failure's records are left out (its failing comparison is the point)."""
    out = os.environ.get(ENV_OUT)
    if out and _records and _current.get("xfail") != nodeid:
        with open(f"{out}.{os.getpid()}.part", "a", encoding="utf-8") as fh:
            for entry in _records.values():
                fh.write(json.dumps(entry, default=float) + "\n")
    _records.clear()


# --- the command line ---------------------------------------------------------------------

def _merge(parts: list[Path]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, int, str], dict[str, Any]] = {}
    for part in parts:
        for line in part.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            key = (entry["file"], entry["line"], entry["kind"])
            old = merged.get(key)
            if old is None:
                merged[key] = entry
                continue
            calls, over = old["calls"] + entry["calls"], old["over"] + entry["over"]
            if entry["ratio"] > old["ratio"]:
                merged[key] = entry
            merged[key].update(calls=calls, over=over)
    return sorted(merged.values(), key=lambda e: (e["file"], e["line"], e["kind"]))


def _part_files(path: Path) -> list[Path]:
    """A results file, or the parts folder that an interrupted ``run`` left (``OUT.parts``)."""
    return sorted(path.glob("margins.*.part")) if path.is_dir() else [path]


def run(out: Path, pytest_args: list[str]) -> int:
    """Run pytest with the recorder; write the worst ratio per site to ``out``."""
    out = out.resolve()
    parts = out.with_name(out.name + ".parts")
    parts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, **{ENV_OUT: str(parts / "margins"), ENV_PYCACHE: tmp})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                          env.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "pytest", "-p", "tolerance_margins", "-q",
               "-o", "enable_assertion_pass_hook=true", *(pytest_args or ["tests"])]
        code = subprocess.call(cmd, cwd=ROOT, env=env)
    entries = _merge(_part_files(parts))
    with out.open("w", encoding="utf-8") as fh:
        for entry in entries:
            fh.write(json.dumps(entry) + "\n")
    shutil.rmtree(parts)
    print(f"tolerance_margins: {len(entries)} sites written to {out} (pytest exit {code})")
    return code


def report(files: list[Path], within: float, kinds: str) -> str:
    """A Markdown table of the sites whose worst ratio over ``files`` is >= 1/within."""
    labels = [f.name.split(".")[0] for f in files]
    table: dict[tuple[str, int, str], dict[str, Any]] = {}
    for label, f in zip(labels, files):
        for entry in _merge(_part_files(f)):
            row = table.setdefault((entry["file"], entry["line"], entry["kind"]),
                                   {**entry, "by": {}})
            row["by"][label] = entry["ratio"]
            if entry["ratio"] > row["ratio"]:
                row.update({k: entry[k] for k in ("ratio", "abs_err", "tolerance", "nodeid")})
    wanted = [r for r in table.values() if r["ratio"] >= 1 / within
              and (kinds == "all" or not r["kind"].endswith(("(ordering)", "(lower bound)")))]
    wanted.sort(key=lambda r: -r["ratio"])
    lines = [f"{len(wanted)} of {len(table)} sites within {within:g}x of their tolerance "
             f"(worst ratio over: {', '.join(labels)})", "",
             "| site | kind | tolerance | worst | " + " | ".join(labels) + " | source |",
             "|---" * (5 + len(labels)) + "|"]
    for r in wanted:
        by = " | ".join(f"{r['by'][lab]:.3g}" if lab in r["by"] else "-" for lab in labels)
        lines.append(f"| {r['file']}:{r['line']} | {r['kind']} | {r['tolerance']} | "
                     f"{r['ratio']:.3g} | {by} | `{r['source'][:70]}` |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run pytest and record the margins")
    p_run.add_argument("out", type=Path)
    p_run.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p_rep = sub.add_parser("report", help="list the sites near their tolerance")
    p_rep.add_argument("files", type=Path, nargs="+")
    p_rep.add_argument("--within", type=float, default=3.0)
    p_rep.add_argument("--kinds", choices=("tolerances", "all"), default="tolerances")
    args = parser.parse_args(argv)
    if args.command == "run":
        extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        return run(args.out, extra)
    print(report(args.files, args.within, args.kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
