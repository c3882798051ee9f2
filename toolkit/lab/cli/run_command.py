"""One ``toolkit run`` or ``toolkit sweep`` as one object, :class:`RunCommand`: it plans (every
input checked before the first run starts), executes (the progress followed on the terminal),
reports (seed groups and their reports) and gives the exit status. SIGINT or SIGTERM at any
moment ends it with one summary of what is complete and the command that finishes the rest."""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._utils.formatting import fmt, shown
from toolkit.lab.cli import terminal
from toolkit.lab.errors import ConfigError, RunInterrupted
from toolkit.lab.execute.signals import held_signals

__all__ = ["RunCommand"]

EXIT_OK = 0


def _warn(text: str) -> None:
    print(f"toolkit: warning: {shown(text)}", file=sys.stderr, flush=True)


def _report_quietly(run_dir: Path, experiment: Any = None) -> Path:
    """The report, its notes kept off the terminal (module-level: a pool's workers call it)."""
    from toolkit.lab.report import write_report
    from toolkit.lab.report.render import held_notes

    with held_notes():
        return write_report(run_dir, experiment)


@dataclass
class Planned:
    """What a run command will run: the runs, their executor, whether they make seed groups,
    and the complete runs found by ``--resume`` that join those groups."""

    runs: list[Any]
    executor: Any
    grouped: bool
    earlier: list[Path] = field(default_factory=list)


@dataclass
class RunCommand:
    """``toolkit run CONFIG...`` (or ``sweep``) with its options, as the command line gave
    them; calling it runs it and returns the exit status. ``ended``, ``planned`` and
    ``undrawn`` say how far it got: the summary of an interrupt reads them."""

    configs: Sequence[str]
    max_runs: int
    overrides: Sequence[str] = ()
    seeds: str | None = None
    out: str | None = None
    tensorboard: str | None = None
    #: ``kind`` (local or dask) and the cluster's options (workers, address, TLS files, ...)
    executor: Mapping[str, Any] = field(default_factory=dict)
    quiet: bool = False
    verbose: bool = False
    report: bool = True
    dry_run: bool = False
    resume: bool = False
    #: the command's arguments, to run it again when stopped
    argv: Sequence[str] = ()
    ended: list[Any] = field(default_factory=list, init=False)  # the outcomes so far
    planned: int = field(default=0, init=False)  # runs planned
    undrawn: list[Path] = field(default_factory=list, init=False)  # reports due

    def __call__(self) -> int:
        """Plan, execute and report; the exit status (0 done, 1 a run failed, 128 + the
        signal that stopped it)."""
        try:
            work = self.plan()
            if work is None:
                return EXIT_OK
            if self.dry_run:
                for r in work.runs:
                    print(" ".join([f"{r.config.experiment} seed={r.seed}",
                                    *(f"{k}={v}" for k, v in r.sweep_point.items())]))
                print(f"{terminal.count(len(work.runs), 'run')}; executor {work.executor.kind}")
                return EXIT_OK
            t0 = time.perf_counter()
            status = self.execute(work)
            if status >= 128:
                raise RunInterrupted(status - 128)  # the summary says what is complete
            self.tell(self.finish(work, t0), work.runs)
            return status
        except KeyboardInterrupt as err:  # RunInterrupted too
            from toolkit.lab.execute.signals import say_interrupted

            signum = getattr(err, "signum", signal.SIGINT)
            return say_interrupted(signum, "\n".join(_summary(
                signum, self.ended, self.planned, self.undrawn, self.argv)))

    def plan(self) -> Planned | None:
        """Every run of every config, checked before any starts (a ConfigError otherwise);
        ``None`` when ``--resume`` finds nothing left to do (said on the terminal)."""
        from toolkit.lab.execute.resume import done_as_requested, plan_resume
        from toolkit.lab.plan.config import Plan, executor_for, parse_seeds
        from toolkit.lab.results.records import group_key

        if self.max_runs < 1:
            raise ConfigError("--max-runs", "", f"must be >= 1, got {self.max_runs}",
                              "give the most runs this command may make, e.g. --max-runs 20000")
        seeds = parse_seeds(self.seeds, limit=self.max_runs) if self.seeds is not None else None
        plans = [Plan.read(path, self.overrides, seeds=seeds, output_dir=self.out,
                           tensorboard=self.tensorboard, max_runs=self.max_runs)
                 for path in self.configs]
        boards = [p for p in plans if p.file.tensorboard is not None]
        if boards:  # a missing extra is an input error, before anything runs
            from toolkit.lab.execute.live_curves import check_tensorboard

            check_tensorboard("--tensorboard" if self.tensorboard else boards[0].source)
        self.planned = total = sum(len(p) for p in plans)
        if total > self.max_runs:
            raise ConfigError(" ".join(self.configs), "", f"give {total:,} runs together, "
                              f"above the limit of {self.max_runs:,}", "run fewer configs at "
                              "once, or raise the limit with --max-runs N")
        options = dict(self.executor)
        executor = executor_for(plans, kind=options.pop("kind", None), **options)
        done = done_as_requested(plans) if self.resume and not self.dry_run else None
        if done is not None:  # known without importing torch or an experiment
            _skipped(done, quiet=self.quiet, nothing_left=True)
            return None
        # the first import of torch runs Python code under C++ frames: a signal raised there
        # aborts the process (pybind11's error_already_set, SIGABRT) instead of ending the
        # command, so a Ctrl-C is kept until the import is done and given back after it
        with held_signals:
            from toolkit.lab.execute.dask import check_executor, import_distributed

        check_executor(executor)
        if executor.kind == "dask":
            import_distributed()  # a missing extra is an input error, before anything runs
        runs = [spec for p in plans for spec in p.specs()]
        _no_twice(runs)
        work = Planned(runs, executor, len({group_key(r.config) for r in runs}) < len(runs))
        if self.resume:
            resume = plan_resume(runs)
            for err in resume.damaged:
                _warn(f"{err}; not counted as complete")
            for running in resume.running:
                print(f"skipped (running now, not started twice): {shown(running)}",
                      file=sys.stderr)
            work.runs, work.earlier = resume.todo, resume.done
            _skipped(work.earlier, quiet=self.quiet, nothing_left=not work.runs)
            if not work.runs:
                return None
        self.planned = len(work.runs)
        from toolkit.lab.execute.run import check_output_dir

        for root, name in dict.fromkeys((r.config.output_dir, r.experiment.name)
                                        for r in work.runs):
            check_output_dir(root, name, source=work.runs[0].source, create=not self.dry_run)
        return work

    def execute(self, work: Planned) -> int:
        """Run the planned runs (claimed first with ``--resume``), followed on the terminal;
        their exit status. A run outside a seed group draws its report as it ends."""
        from toolkit.lab.execute.local import run_all
        from toolkit.lab.execute.resume import claimed

        executor = work.executor
        names = ", ".join(dict.fromkeys(r.experiment.name for r in work.runs))
        n = min(executor.workers, len(work.runs))
        where = {"local": f" in {n} processes" if n > 1 else "",
                 "dask": f" on Dask ({executor.address or f'{executor.workers} local workers'})"}
        # a seed group gets one report over its seeds once all have ended (none of their own)
        finish = _report_quietly if self.report and not work.grouped else None
        label = f"{names}: {terminal.count(len(work.runs), 'run')}{where[executor.kind]}"
        claim = claimed(work.runs) if self.resume else contextlib.nullcontext(work.runs)
        with _notes(self.verbose), claim as runs, terminal.Follow(
                runs, label, quiet=self.quiet, verbose=self.verbose) as follow:

            def on_done(i: int, total: int, outcome: Any) -> None:
                self.ended.append(outcome)
                if finish is not None and outcome.status == "complete":
                    self.undrawn.append(Path(outcome.run_dir))
                follow.ended(i, total, outcome)

            work.runs = runs
            # what a run says (ctx.say, its own bars) is shown with --verbose only
            _, status = run_all(runs, executor=executor, quiet=not self.verbose or n > 1,
                                finish=finish, on_done=on_done, on_progress=follow.heard)
        return status

    def finish(self, work: Planned, t0: float) -> list[Path]:
        """The seed groups of the complete runs and their reports; the folders to tell of,
        groups first."""
        folders = [o.run_dir for o in self.ended if o.status == "complete"]
        if work.grouped:
            with _notes(self.verbose):
                folders = _finish_groups(self.ended, work.runs, report=self.report, t0=t0,
                                         earlier=work.earlier, undrawn=self.undrawn)
            for folder in folders if self.verbose else ():  # where each group's report went
                if (folder / "group.json").is_file():
                    print(f"seed group: {shown(folder)}", file=sys.stderr)
        return folders

    def tell(self, folders: Sequence[Path], runs: Sequence[Any]) -> None:
        """The tally of ``folders`` (with ``--verbose`` every finding in full), or, for many,
        the command that tabulates them."""
        if self.quiet:
            return
        if len(folders) > 3:
            c = runs[0].config
            print(f"{len(folders)} complete run folders; `toolkit compare "
                  f"{shown(Path(c.output_dir) / c.experiment)}` tabulates them")
            return
        for folder in folders if self.verbose else ():
            if (folder / "findings.json").is_file():
                terminal.print_findings(folder)
        terminal.tally(folders)


def _no_twice(runs: Sequence[Any]) -> None:
    """The same run planned twice (a config given twice, two files saying the same): refused
    as repeated seeds are, before anything runs."""
    seen: dict[str, Any] = {}
    for run in runs:
        first = seen.setdefault(run.config.identity(), run)
        if first is not run:
            same = first.source == run.source
            what = "is given twice" if same else f"gives the same run as {shown(first.source)}"
            raise ConfigError(run.source, "", f"{what} (seed {run.seed})",
                              "give each config once" if same else "give one of them")


def _summary(signum: int, ended: Sequence[Any], planned: int, undrawn: Sequence[Path],
             argv: Sequence[str]) -> list[str]:
    """What an interrupted ``toolkit run`` says: each run that ended (an interrupted one with
    what it kept), the runs not started, and the commands that finish the rest."""
    from toolkit.lab.execute.signals import interrupted_line

    head = interrupted_line(signum)
    lines = [f"{head}; of {planned} run{'s' * (planned != 1)}:" if ended
             else head + ("; no run had started" if planned else "")]
    for o in ended:
        note = (f"; {terminal.kept(Path(o.run_dir))}" if o.status == "interrupted"
                else f"; {shown(o.error)}" if o.status == "failed" and o.error else "")
        lines.append(terminal.wrapped(f"{shown(o.run_dir)} ({fmt(o.duration_s, 's')}{note})",
                                      indent=f"  {o.status:<12} ", more=" " * 17))
    if ended and planned > len(ended):
        left = planned - len(ended)
        lines.append(f"  {'not started':<12} {left} run{'s' * (left != 1)}")
    commands = []
    if planned > len(ended) or any(o.status != "complete" for o in ended):
        commands.append(shlex.join(["toolkit", *argv, *(["--resume"] if ended and "--resume"
                                                        not in argv else [])]))
    drawn = [str(f) for f in undrawn if not (Path(f) / "report.html").is_file()]
    if drawn:
        commands.append(shlex.join(["toolkit", "report", *drawn]))
    if not commands:
        return [*lines, "nothing is left to do: every run is complete"]
    return [*lines, f"to finish: {shown(commands[0])}",
            *(f"           {shown(c)}" for c in commands[1:])]


def _skipped(done: Sequence[Path], *, quiet: bool, nothing_left: bool) -> None:
    """``--resume``: each complete run skipped, and whether anything is left to do."""
    for folder in done if not quiet else ():
        print(f"skipped (complete): {shown(folder)}")
    if nothing_left:
        print("nothing to do: every run is complete or running")


def _finish_groups(outcomes: Sequence[Any], runs: Sequence[Any], *, report: bool, t0: float,
                   earlier: Sequence[Path], undrawn: list[Path]) -> list[Path]:
    """The seed groups of the complete runs (and ``earlier`` ones) and the reports of the groups
    and of the runs outside one (a failing report is a warning); the folders, groups first."""
    from toolkit.lab.report import write_report
    from toolkit.lab.results.records import group_runs, record_group, write_group
    from toolkit.lab.results.view import RunResults

    experiments = {r.experiment.name: r.experiment for r in runs}
    done = [o.run_dir for o in outcomes if o.status == "complete"]
    groups = group_runs([*done, *earlier])
    failed = [f"a run with another seed ended {o.status}: {o.run_dir}"
              + (f" ({o.error})" if o.error else "") for o in outcomes if o.status != "complete"]
    # (folder, the run it reads): each group, then each complete run outside a group
    pairs = [(write_group(g, problems=failed), g[0]) for g in groups]
    pairs += [(d, d) for d in done if all(d not in g for g in groups)]
    undrawn += [folder for folder, _ in pairs] if report else []
    for i, (folder, run_dir) in enumerate(pairs):
        try:
            if report:
                write_report(folder, experiments.get(RunResults(run_dir).experiment))
        except Exception as err:
            _warn(f"{folder}: {type(err).__name__}: {err}")
        if i < len(groups):
            record_group(folder, wall_seconds=round(time.perf_counter() - t0, 3))
    return [folder for folder, _ in pairs]


@contextlib.contextmanager
def _notes(verbose: bool) -> Iterator[None]:
    """Notes the report logs (graphs laid out without graphviz: the report says so itself)
    reach the terminal only with ``--verbose``."""
    from toolkit.lab.report.render import held_notes

    with held_notes() as notes:
        yield
    for note in notes if verbose else ():
        print(f"  note: {note}", file=sys.stderr, flush=True)
