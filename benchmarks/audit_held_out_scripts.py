"""Measure ``toolkit audit SCRIPT`` on the held-out training scripts (issue 71, item 1).

The scripts are in ``tests/audit/held_out_scripts/`` (one folder per field, a clean script and a
bug twin), listed in its ``cases.toml``; ``--folder`` judges another batch in the same format
(``tests/audit/held_out_scripts_b/``, written after the audit's rules were tuned on the first). Each is audited as a user runs it,
``python -m toolkit.audit OPTIONS SCRIPT`` (``--steps 2``, or ``--watch 1`` where the bug begins
late: the options are the manifest's), in a fresh temporary copy of its folder. Three numbers:

- clean: the audit of a clean script exits 0;
- named: the audit of a bug exits 1 and one failing finding names the line where the fix
  belongs (the manifest's ``line`` or one of its ``also``) and every tensor the manifest names
  (a reported name matches when the manifest's name is a dotted part of it, a subscript
  counted as a part, ``model["rep"].0.bias`` as ``model.rep.0.bias``; ``a|b`` takes either);
- trains: ``--apply`` writes an edit into the bug script (in another fresh copy) after which the
  edited script, run with ``--out``, saves the same weights as its correct twin (every tensor
  within 1e-5), and a second audit of the edited script exits 0.

The findings are read from what the command prints: a block per finding that starts with
``FAIL``, its indented lines ``tensors: a, b`` (and ``values: c``, the values a cut makes),
``at: FILE:LINE: ...`` and ``edit: FILE:LINE: ...``
(and, where ``--record`` wrote one, from ``report.json``). A table gives each case's outcome.

    python benchmarks/audit_held_out_scripts.py [--folder PATH] [--case SUBSTRING] [--json PATH]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "tests" / "audit" / "held_out_scripts"
TOLERANCE = 1e-5
_folder = FOLDER  # the batch being judged: FOLDER unless --folder names another


@dataclass
class Finding:
    text: str
    tensors: list[str] = field(default_factory=list)
    lines: set[int] = field(default_factory=set)


@dataclass
class Outcome:
    script: str
    kind: str = "clean"
    ok_clean: bool = False
    named: bool = False
    trains: bool = False
    exit_code: int | None = None
    note: str = ""
    edit_note: str = ""
    seconds: float = 0.0


def audit(copy: Path, script: str, options: list[str], timeout: float,
          record: bool = True) -> tuple[int, str, list[Finding]]:
    """Runs the command on ``copy/script``; returns its exit status, output and failures."""
    name = Path(script).name
    rec = copy / ".audit-record"
    shutil.rmtree(rec, ignore_errors=True)
    command = [sys.executable, "-m", "toolkit.audit", *options]
    if record:
        command += ["--record", str(rec)]
    try:
        done = subprocess.run([*command, name], cwd=copy, capture_output=True, text=True,
                              timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s", []
    output = done.stdout + done.stderr
    findings = _printed(output, name) + _recorded(rec / "report.json", name)
    shutil.rmtree(rec, ignore_errors=True)
    return done.returncode, output, findings


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def _lines(text: str, name: str) -> set[int]:
    return {int(n) for n in re.findall(rf"(?<![\w.]){re.escape(name)}:(\d+)", text)}


def _printed(output: str, name: str) -> list[Finding]:
    findings: list[Finding] = []
    current: Finding | None = None
    for line in output.splitlines():
        if line.startswith("FAIL"):
            current = Finding(text=line)
            findings.append(current)
        elif current is not None and line[:1].isspace() and line.strip():
            current.text += "\n" + line
            body = line.strip()
            if body.startswith(("tensors:", "values:")):
                listed = body.split(":", 1)[1]
                current.tensors += [t.strip() for t in listed.split(",") if t.strip()]
        elif line.strip():
            current = None
    for f in findings:
        f.lines = _lines(f.text, name)
        f.tensors += re.findall(r"`([A-Za-z_][\w.]*)`", f.text)
    return findings


def _recorded(path: Path, name: str) -> list[Finding]:
    if not path.is_file():
        return []
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    findings = []
    for entry in report.get("findings", []):
        if not entry.get("failure"):
            continue
        text = json.dumps(entry)
        tensors = [t for t in entry.get("tensors", []) if isinstance(t, str)]
        tensors += [t for key in ("names", "values") for t in entry.get(key, [])
                    if isinstance(t, str)]
        lines = _lines(text, name)
        for edit in entry.get("edits", []):
            start = edit.get("start")
            if Path(str(edit.get("path", ""))).name == name and start:
                lines.add(int(start[0]))
        findings.append(Finding(text=text, tensors=tensors, lines=lines))
    return findings


def _parts(name: str) -> str:
    """A reported name with its subscripts as dotted parts (``model["rep"].0.bias`` ->
    ``model.rep.0.bias``, as torch names a ``ModuleDict``'s tensors)."""
    return re.sub(r"""\[["']?([^\]"']+)["']?\]""", r".\1", name)


def _matches(expected: str, reported: list[str]) -> bool:
    reported = [_parts(name) for name in reported]
    return any(f".{choice}." in f".{name}." for choice in expected.split("|")
               for name in reported)


def _copy(field_folder: str, into: Path) -> Path:
    target = into / field_folder
    shutil.copytree(_folder / field_folder, target,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def train(copy: Path, script: str, out: Path, timeout: float) -> dict[str, torch.Tensor] | str:
    """Runs a script plainly with ``--out``; its saved tensors by name, or why there are none."""
    try:
        done = subprocess.run([sys.executable, Path(script).name, "--out", str(out)], cwd=copy,
                              capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        return "timed out"
    if done.returncode != 0 or not out.is_file():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"exit {done.returncode}: {tail[:100]}"
    return _flat(torch.load(out, weights_only=True))


def _flat(tree, prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return {prefix: tree}
    out: dict[str, torch.Tensor] = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        return float("inf")
    # in double precision; a complex tensor (a Fourier layer's weights) as complex, so that
    # its imaginary part counts too
    def wide(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.complex128 if t.is_complex() else torch.float64)

    return max((wide(a[k]) - wide(b[k])).abs().max().item() for k in a)


def judge_clean(entry: dict, timeout: float) -> Outcome:
    outcome = Outcome(script=entry["script"])
    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy(entry["script"].split("/")[0], Path(tmp))
        code, output, findings = audit(copy, entry["script"], entry["audit"], timeout)
    outcome.exit_code, outcome.ok_clean = code, code == 0
    if code != 0:
        first = next((f.text.splitlines()[0] for f in findings if f.text), "")
        outcome.note = first[:110] or _last(output)
    return outcome


def judge_bug(entry: dict, timeout: float) -> Outcome:
    script, name = entry["script"], Path(entry["script"]).name
    outcome = Outcome(script=script, kind=entry["kind"])
    lines = {entry["line"], *entry.get("also", [])}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        copy = _copy(script.split("/")[0], tmp / "audited")
        code, output, findings = audit(copy, script, entry["audit"], timeout)
        outcome.exit_code = code
        at_line = [f for f in findings if f.lines & lines]
        named = [f for f in at_line
                 if all(_matches(want, f.tensors) for want in entry["tensors"])]
        outcome.named = code == 1 and bool(named)
        if code != 1:
            outcome.note = f"exit {code}" + ("" if code == 0 else f": {_last(output)}")
        elif not findings:
            outcome.note = "exit 1, no failure read"
        elif not at_line:
            seen = sorted(set().union(*(f.lines for f in findings)))
            outcome.note = f"failure at line(s) {seen or 'none'}, not {entry['line']}"
        elif not named:
            got = sorted({t for f in at_line for t in f.tensors})
            outcome.note = f"line {entry['line']}, tensors {_short(got)} not {entry['tensors']}"
        else:
            outcome.note = "named"

        edited = _copy(script.split("/")[0], tmp / "applied")
        before = (edited / name).read_text(encoding="utf-8")
        _, applied, _ = audit(edited, script, ["--apply", *entry["audit"]], timeout,
                              record=False)
        after = (edited / name).read_text(encoding="utf-8")
        if after == before:
            said = [ln for ln in applied.splitlines() if ln.startswith("toolkit audit:")]
            outcome.edit_note = "no edit written" + (f" ({said[-1][15:95]})" if said else "")
            return outcome
        mine = train(edited, script, tmp / "edited.pt", timeout)
        twin = train(copy, entry["twin"], tmp / "twin.pt", timeout)
        if isinstance(mine, str) or isinstance(twin, str):
            outcome.edit_note = f"edited script: {mine}" if isinstance(mine, str) else \
                f"twin: {twin}"
            return outcome
        gap = _gap(mine, twin)
        if gap > TOLERANCE:
            outcome.edit_note = f"edit written; trains apart from the twin (max gap {gap:.2g})"
            return outcome
        again, _, _ = audit(edited, script, entry["audit"], timeout, record=False)
        outcome.trains = again == 0
        outcome.edit_note = "trains as the twin; second audit clean" if again == 0 else \
            f"trains as the twin; second audit exits {again}"
    return outcome


def _last(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:110] if lines else "no output"


def _short(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folder", type=Path, default=FOLDER,
                   help="the batch to judge: a folder with cases.toml (default: %(default)s)")
    p.add_argument("--case", default="", help="only the scripts whose path holds this")
    p.add_argument("--json", default=None, help="write every outcome to this file as JSON")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    args = p.parse_args(argv)
    global _folder
    _folder = args.folder.resolve()
    manifest = tomllib.loads((_folder / "cases.toml").read_text(encoding="utf-8"))
    clean = [e for e in manifest["clean"] if args.case in e["script"]]
    bugs = [e for e in manifest["bug"] if args.case in e["script"]]

    outcomes: list[Outcome] = []
    for entry in clean:
        start = time.perf_counter()
        outcome = judge_clean(entry, args.timeout)
        outcome.seconds = time.perf_counter() - start
        outcomes.append(outcome)
        print(f"clean {entry['script']:<42} exit {outcome.exit_code} {outcome.note}", flush=True)
    for entry in bugs:
        start = time.perf_counter()
        outcome = judge_bug(entry, args.timeout)
        outcome.seconds = time.perf_counter() - start
        outcomes.append(outcome)
        print(f"bug   {entry['script']:<42} exit {outcome.exit_code} {outcome.note}; "
              f"{outcome.edit_note}", flush=True)

    n_clean = sum(o.ok_clean for o in outcomes if o.kind == "clean")
    n_named = sum(o.named for o in outcomes if o.kind != "clean")
    n_trains = sum(o.trains for o in outcomes if o.kind != "clean")
    print()
    print(f"{'script':<44} {'line':>4}  {'exit':>4}  {'named':<5}  {'trains':<6}  outcome")
    for entry in clean:
        o = next(o for o in outcomes if o.script == entry["script"])
        print(f"{o.script:<44} {'':>4}  {o.exit_code!s:>4}  {'':<5}  {'':<6}  "
              f"{'clean' if o.ok_clean else o.note}")
    for entry in bugs:
        o = next(o for o in outcomes if o.script == entry["script"])
        print(f"{o.script:<44} {entry['line']:>4}  {o.exit_code!s:>4}  "
              f"{'yes' if o.named else 'no':<5}  {'yes' if o.trains else 'no':<6}  "
              f"{o.note}; {o.edit_note}")
    print()
    print(f"clean scripts exiting 0:                          {n_clean}/{len(clean)}")
    print(f"bugs exiting 1 at the right line with the tensors: {n_named}/{len(bugs)}")
    print(f"bugs with an edit that trains as the twin:        {n_trains}/{len(bugs)}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=1),
                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
