"""The audit beside the tools people have, on the real-code corpus: one row per training step.

For every case of ``tests/lens/audit/real_code`` (training steps written from public
repositories, each with its ``truth``: ``correct`` or the kind of its bug), three tools look at
the same step:

- ``audit_step(case.step, case.optimizers, modules=case.modules)``: its verdict (``ok`` or the
  kinds it found) and the first finding's located fix (its ``line`` when it has one, else the
  first line of its ``fix``);
- ``DistributedDataParallel`` with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (default
  ``find_unused_parameters=False``): two gloo processes on 127.0.0.1 build the case from the
  same seed, wrap each of its modules that has trainable parameters and train 3 iterations;
  the first error raised (DDP's own, or autograd's during a DDP run) is the answer. The
  process group itself is made at ``INFO``: at ``DETAIL`` gloo is wrapped in a
  ``ProcessGroupWrapper`` and DDP's constructor segfaults on torch 2.13's CPU build (see
  :func:`ddp_run`); DDP and its reducer run at ``DETAIL``;
- ``torch.autograd.detect_anomaly()``: 2 iterations of a fresh copy inside it; the first error
  or anomaly warning is the answer.

How the step's forward reaches DDP: a case calls its modules directly (``netD(x)``,
``flow.log_prob(x)``, ``model.encoder(x)``), never through a wrapper. Every submodule of a
wrapped module gets forward hooks; the outermost call into the module's tree runs DDP's
``_pre_forward`` before it and ``_post_forward`` after it, which is what
``DistributedDataParallel.forward`` does around ``self.module(...)`` (read
``torch/nn/parallel/distributed.py``). On CPU, without ``device_ids``, mixed precision or
``find_unused_parameters``, both return their argument unchanged, so the step computes exactly
what it computes without DDP. A step that calls one module several times (a discriminator on
real and fake) calls DDP's forward several times, as the same code written with the wrapper
would. A module read without any module call (``module.forward(x)``, a bare parameter) is not
seen by DDP: the cell says so.

One training iteration, for DDP and anomaly mode alike: ``losses = step()``; each loss in
order is backpropagated alone (``retain_graph`` until the last), gradients cleared before each,
and what reaches the tensors its optimizer steps is kept; then every optimizer steps with the
sum of its losses' gradients, and gradients are cleared. An optimizer that is a module (trained
by hand, ``p.data.add_(p.grad)``) is stepped as plain SGD with ``lr = 0.1``.

    python benchmarks/audit_peers.py [--cases a,b] [--out FILE.md] [--update-docs]

``--update-docs`` rewrites the table in ``docs/guides/audit_peers.md`` (between
``<!-- peers-table:start -->`` and ``<!-- peers-table:end -->``). A DDP case runs in a pair of
worker processes kept for the whole run; a case that does not answer within ``--timeout``
seconds is reported as a hang and the pair is restarted.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from peers_cases import (
    ANOMALY_ITERATIONS,
    DDP_ITERATIONS,
    ROOT,
    CaseUnavailable,
    Cell,
    build,
    corpus,
    error_text,
    one_line,
    train,
)
from peers_ddp import WorkerPair, ddp_cell

from toolkit._utils.threads import intra_op_threads

DOCS_PAGE = ROOT / "docs" / "guides" / "audit_peers.md"
START, END = "<!-- peers-table:start -->", "<!-- peers-table:end -->"
KINDS = ("leaks", "targets", "dead", "carried", "held")


# --- audit_step ---------------------------------------------------------------------------------


def audit_cell(name: str, seed: int = 0) -> Cell:
    """The audit's verdict on the case: ``ok`` or the kinds found (with counts); ``names``: the
    lines of the user's code its fixes name (``realcode_gans.py:64``)."""
    from toolkit import audit_step

    case = build(name, seed)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            audit = audit_step(case.step, case.optimizers, modules=case.modules)
    except Exception as err:  # the table reports what the tool raised
        return Cell(f"raised {one_line(error_text(err), 150)}", True, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    found = [(k, getattr(audit, k, ())) for k in KINDS if getattr(audit, k, ())]
    if not found:
        return Cell("ok", False, seconds)
    verdict = ", ".join(f"{k} ({len(v)})" for k, v in found)
    # the lines of the user's code its fixes name (every failing finding, in order); the fix
    # itself is in the audit's report, which the table does not repeat
    lines = [f"{x.file}:{x.number}" for _, items in found for f in items
             for x in getattr(f, "lines", ())]
    return Cell(one_line(verdict), True, seconds, list(dict.fromkeys(lines)))


# --- anomaly mode -------------------------------------------------------------------------------

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def user_frame(traceback_text: str) -> str | None:
    """``file.py:LINE`` of the last frame of a forward traceback outside torch."""
    frames = [(f, n) for f, n in _FRAME.findall(traceback_text)
              if f"{os.sep}torch{os.sep}" not in f and "audit_peers" not in f]
    return f"{Path(frames[-1][0]).name}:{frames[-1][1]}" if frames else None


def anomaly_cell(name: str, seed: int = 0, iterations: int = ANOMALY_ITERATIONS) -> Cell:
    """``iterations`` of a fresh copy inside ``torch.autograd.detect_anomaly()``: the first
    error (with the forward line anomaly mode blames), or an anomaly warning, or ``nothing``."""
    case = build(name, seed)
    start = time.perf_counter()
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly():
                train(case, iterations)
        except Exception as err:  # the answer
            error = err
    seconds = time.perf_counter() - start
    blamed = [str(w.message) for w in caught if "Error detected in" in str(w.message)]
    if error is not None:
        head = error_text(error)
        if blamed:
            node = re.search(r"Error detected in (\w+)", blamed[0])
            frame = user_frame(blamed[0])
            head = f"{head} Blames {node[1] if node else '?'}, made at {frame or '?'}."
        return Cell(one_line(head, 300), True, seconds)
    nan = [str(w.message) for w in caught if re.search(r"\bnan\b", str(w.message), re.I)]
    if nan:
        return Cell(one_line(f"warning: {nan[0]}"), True, seconds)
    return Cell("nothing", False, seconds)


# --- the table ----------------------------------------------------------------------------------


@dataclass
class Row:
    case: str
    truth: str
    audit: Cell
    ddp: Cell
    anomaly: Cell


def measure(names: list[str], seed: int = 0, timeout_s: float = 60.0,
            log: Callable[[str], None] = print) -> list[Row]:
    """Every tool on every case named, in order."""
    pair = WorkerPair(timeout_s, warm=tuple(names))
    rows = []
    try:
        try:
            pair.start()
        except RuntimeError as err:
            pair, reason = None, str(err)
        for name in names:
            try:
                truth = build(name, seed).truth
            except CaseUnavailable as err:
                out = Cell(f"could not run: {err}", False, 0.0)
                rows.append(Row(name, "?", out, out, out))
                continue
            audit = audit_cell(name, seed)
            ddp = (ddp_cell(name, seed, pair) if pair is not None
                   else Cell(f"could not run: {reason}", False, 0.0))
            anomaly = anomaly_cell(name, seed)
            rows.append(Row(name, truth, audit, ddp, anomaly))
            log(f"{name}: audit {audit.seconds:.2f} s, DDP {ddp.seconds:.2f} s, "
                f"anomaly {anomaly.seconds:.2f} s")
    finally:
        if pair is not None:
            pair.close()
    return rows


def _md(text: str) -> str:
    """A table cell's text as Markdown shows it: no column break, tag, code span, emphasis or
    reference link (``model[1][0]`` is a cross-reference to mkdocs-autorefs)."""
    for char in "\\|[]*":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("`", "'")


def table(rows: list[Row]) -> str:
    """The Markdown table (one row per case), a summary per truth and the time per tool."""
    lines = ["| case | truth | `audit_step` | the fix line it prints | DDP (`DETAIL`) |"
             " `detect_anomaly()` | time (s): audit / DDP / anomaly |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        at = ", ".join(r.audit.names) or "—"
        lines.append(f"| `{r.case}` | {r.truth} | {_md(r.audit.text)} | {_md(at)} | "
                     f"{_md(r.ddp.text)} | "
                     f"{_md(r.anomaly.text)} | {r.audit.seconds:.2f} / {r.ddp.seconds:.2f} / "
                     f"{r.anomaly.seconds:.2f} |")
    lines += ["", "Cases each tool flags (anything said besides `ok`, `no error`, `nothing`), "
              "by truth; for the audit, the cases it reports in their truth's kind:", "",
              "| truth | cases | `audit_step` (its kind) | DDP | `detect_anomaly()` |",
              "|---|---|---|---|---|"]
    truths = sorted({r.truth for r in rows}, key=lambda t: (t != "correct", t))
    for truth in truths:
        mine = [r for r in rows if r.truth == truth]
        right = sum(truth in r.audit.text.split(":")[0] for r in mine) if truth != "correct" \
            else sum(r.audit.flagged for r in mine)
        lines.append(f"| {truth} | {len(mine)} | {right} | {sum(r.ddp.flagged for r in mine)} | "
                     f"{sum(r.anomaly.flagged for r in mine)} |")
    total = {k: sum(getattr(r, k).seconds for r in rows) for k in ("audit", "ddp", "anomaly")}
    lines += ["", f"Time over {len(rows)} cases: `audit_step` {total['audit']:.1f} s, "
              f"DDP {total['ddp']:.1f} s (2 processes, {DDP_ITERATIONS} iterations), "
              f"`detect_anomaly()` {total['anomaly']:.1f} s ({ANOMALY_ITERATIONS} iterations). "
              f"torch {torch.__version__}."]
    return "\n".join(lines) + "\n"


def update_docs(text: str, page: Path = DOCS_PAGE) -> None:
    """Replace the region between the page's markers with ``text``."""
    doc = page.read_text(encoding="utf-8")
    if START not in doc or END not in doc:
        raise ValueError(f"audit_peers: {page} must hold {START} and {END}")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{START}\n{text}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", help="comma-separated case names (default: the whole corpus)")
    parser.add_argument("--out", help="write the Markdown table to this file")
    parser.add_argument("--update-docs", action="store_true",
                        help=f"rewrite the table in {DOCS_PAGE.relative_to(ROOT)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a DDP case may take before it is reported as a hang")
    args = parser.parse_args(argv)
    cases = corpus()
    names = args.cases.split(",") if args.cases else list(cases)
    unknown = [n for n in names if n not in cases]
    if unknown:
        parser.error(f"unknown cases {unknown}; the corpus has {sorted(cases)}")
    start = time.perf_counter()
    with intra_op_threads(1):
        rows = measure(names, args.seed, args.timeout, log=lambda s: print(s, file=sys.stderr))
    text = table(rows)
    print(text)
    print(f"total {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.update_docs:
        update_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
