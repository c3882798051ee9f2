"""Report sections drawn while the run goes on: each showcase experiment's, as it ends.

A showcase runs its experiments one after the other, in one process on one intra-op thread, so
on a machine with two cores one of them idles until the report is drawn at the end. With
:class:`Drafts`, the run says as each child ends (:meth:`RunContext.child_done
<toolkit.lab.runner.context.RunContext.child_done>`) and the child's section is drawn then, in
one forked process, from the files the child has written. When the run ends only what was not
drawn yet is left: the report (:func:`~toolkit.lab.report.render.write_report` with
``drafts=``) takes each draft whose child's files are still what they were when it was drawn
(the key of :mod:`~toolkit.lab.report.figure_cache`), and draws the others itself, the drafts
not yet started among them, on every core.

A draft is the figures the report would draw: the same code on the same files gives the same
PNG bytes (``tests/lab/report/test_drafts.py`` compares them). A draft that failed, reported a
problem or no longer matches its child's files is never used. Where processes cannot be forked
(not on Linux or macOS, or inside a pool's worker, which may not start processes) nothing is
drafted and the report draws everything at the end, as without drafts.
"""

from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from toolkit.lab.report import figure_cache
from toolkit.lab.report.content import FigureItem, section_figures, section_job
from toolkit.lab.runner.results import RunResults

__all__ = ["DraftBoard", "Drafts"]


def _can_fork() -> bool:
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon)


def _drafter_signals() -> None:
    """In the drawing process, forked while the run's handlers are installed: Ctrl-C is the
    run's to handle (the process is ended with the run), and SIGTERM ends it plainly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class Drafts:
    """The sections of one run's report drawn ahead, one process drawing them in the order
    their children end.

    ``experiment``: the :class:`~toolkit.lab.runner.Experiment` of the run (a showcase; each
    child's section is drawn by its part's ``figures``). Use :meth:`child_done` as the hook of
    the run's reporter, hand the object to the report, and :meth:`close` it at the end
    (also a context manager).
    """

    def __init__(self, experiment: Any) -> None:
        self.experiment = experiment
        self._pool: Any = None
        #: section (figure-name prefix) -> (run directory, key when it was drawn, the drawing)
        self._drafts: dict[str, tuple[str, str, Future[Any]]] = {}

    def __enter__(self) -> Drafts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def child_done(self, run_dir: str, name: str) -> None:
        """Child ``name`` of the run in ``run_dir`` has written its files: start drawing its
        section. Never raises (a draft that cannot be made is drawn by the report)."""
        if not _can_fork() or "/" in name:  # a grandchild has no section of its own
            return
        try:
            self._submit(run_dir, name)
        except Exception:  # drafting is an optimisation: the report draws what is missing
            return

    def _submit(self, run_dir: str, name: str) -> None:
        view = RunResults(run_dir).child(name)
        part = (self.experiment.parts.get(view.experiment)
                if self.experiment is not None else None)
        job = section_job(run_dir, (), name, True, part)
        key = figure_cache.section_key([run_dir], name, part, job[3])
        if self._pool is None:
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("fork"),
                initializer=_drafter_signals)
        self._drafts[job[3]] = (str(run_dir), key, self._pool.submit(section_figures, job))

    def take(self, run_dir: str | Path, section: str, key: str) -> list[FigureItem] | None:
        """The figures drawn ahead for ``section`` (its figure-name prefix) of the run in
        ``run_dir``, waiting for them if they are being drawn; ``None`` when there is no draft,
        it was not started yet (it is cancelled: the caller draws it), it failed, reported a
        problem, or was drawn for other files (its key is not ``key``)."""
        found = self._drafts.pop(section, None)
        if found is None:
            return None
        where, drawn_for, future = found
        if where != str(run_dir) or drawn_for != key or future.cancel():
            future.cancel()
            return None
        try:
            figures, problems = future.result()
        except Exception:  # a broken drawing process: the caller draws the section
            return None
        return None if problems else figures

    def close(self) -> None:
        """Stop drawing: drafts not started are dropped, the drawing process ends."""
        self._drafts.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DraftBoard:
    """The :class:`Drafts` of every run one command makes in this process, one per run
    directory: :meth:`child_done` is the runs' reporters' hook, :meth:`pop` gives a run's
    report its drafts, :meth:`close` ends what is left (a run that failed or was
    interrupted)."""

    def __init__(self) -> None:
        self._runs: dict[str, Drafts] = {}

    def __enter__(self) -> DraftBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def child_done(self, experiment: Any, run_dir: str, name: str) -> None:
        """Child ``name`` of the run in ``run_dir`` (made by ``experiment``) has ended."""
        self._runs.setdefault(str(run_dir), Drafts(experiment)).child_done(run_dir, name)

    def pop(self, run_dir: str | Path) -> Drafts | None:
        """The drafts of the run in ``run_dir`` (``None`` when it had no children)."""
        return self._runs.pop(str(run_dir), None)

    def close(self) -> None:
        for drafts in self._runs.values():
            drafts.close()
        self._runs.clear()
