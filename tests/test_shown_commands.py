"""Every command and config the documentation shows runs, at a small size, and no prediction
in its findings fails (issue 54: "Every command and config the README, ``--help`` and the guides
show runs with no 'not as predicted'").

Where the commands come from: the texts a reader sees, parsed, never listed by hand, so that a
command added to a guide is run here without a change to this file:

- every ``toolkit run …`` and ``toolkit sweep …`` in the README, CONTRIBUTING.md and every page
  under ``docs/`` (code blocks and inline code; a ``\\`` continues a line; a command ends at a
  backtick, ``#``, ``&&``, ``;``, ``|`` or a gap of two spaces, where the help's description
  column begins);
- the same in the output of ``toolkit --help``, ``toolkit run --help`` and
  ``toolkit sweep --help``;
- every shipped config those texts name (``configs/vq_vae.toml``, or ``adversarial_moons.toml``
  beside a command), as ``toolkit run CONFIG`` where no command shows it.

Every command must parse with the toolkit's own parser. A command that names a file the reader
writes first (``my_probe.toml``, ``configs/a.toml``) or that runs nothing (``--dry-run``) is
collected and not run, with the reason as its skip message.

How they run: in this process through :func:`toolkit.lab.cli.app.main`, with the command's own
configs, ``--set`` overrides, ``--seeds`` and ``--resume``, then overrides that shrink every size
(:data:`SMALL`: the smaller of the run's value and this one, for the showcase each part's
``QUICK`` shrunk the same way; a key that the config sweeps is left alone), on the CPU, into
``tmp_path``, without the report. Where the runs run (``--executor``, ``--address``,
``--workers``) changes no finding, so every command runs locally in one process. Commands that
differ only in those options, or in a size the overrides set anyway, run once. Then every
finding a reader would see, read back with :func:`toolkit.lab.read_findings` (a seed group's
over its seeds, a run's alone where it has no group), must not be "not as predicted".
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import pytest

from toolkit.lab.cli.app import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
HELP = (["--help"], ["run", "--help"], ["sweep", "--help"])

#: Small sizes by experiment: only sizes (counts, widths, epochs, samples, rounds), each the
#: largest a run here gets; a run whose own value is smaller keeps it.
SMALL: dict[str, dict[str, Any]] = {
    "vq_vae": {"epochs": 3, "hidden": 32},
    "adversarial_training": {
        "epochs": 1, "n_train": 200, "n_samples": 200, "hidden": [16, 16], "n_eval": 50,
        "check_size": 50, "eval_steps": 5, "eval_restarts": 1, "memory_steps": [1, 3],
        "memory_batch": 16, "grad_batch": 16, "n_examples": 4},
    "gradient_lens": {"q_hidden": 16, "batch": 16, "td_steps": 10, "gan_hidden": 16,
                      "gan_batch": 32, "rounds": 6},
    "audit_corpus": {"width": 16, "batch": 16, "rounds": 3},
    "td_learning": {"a_split_steps": 50, "baird_sweeps": 100, "chain_steps": 100},
    "em_gmm": {"n_samples": 200, "n_iter": 5, "inner_steps": 3, "include_iris": False},
    "rbm_cd": {"n_iter": 50, "n_components": 8, "sample_steps": 50, "n_samples": 4},
    "simsiam": {"epochs": 4, "hidden": 32, "dim": 16},
    "dice": {"sample_sizes": [10, 100, 1000], "repeats": 4, "timing_repeat": 3},
    "softmax_gradients": {"n_rows": 8, "n_cols": 16, "failure_points": 9,
                          "cost_shapes": [[64, 64]], "cost_repeat": 6},
}

#: Smaller still for one config, on top of :data:`SMALL` (the digits RBM takes 135 mini-batches
#: an epoch and an exact likelihood every epoch).
SMALL_CONFIGS: dict[str, dict[str, Any]] = {"rbm_digits": {"n_iter": 3}}

#: Commands and configs the texts show today: the parser must find at least these.
KNOWN = {
    "run configs/showcase.toml",
    "run configs/showcase.toml --seeds 0",
    "run configs/em_gmm.toml --set params.n_iter=20 --seeds 0,1,2",
    "run configs/td_learning.toml --set params.chain_steps=50 --set dtype=float32",
    "sweep configs/em_gmm_sweep.toml",
    "sweep configs/td_learning.toml --set sweep.params.lr=[0.1,0.5]",
    "sweep configs/td_learning.toml --seeds 0-4 --resume",
    *(f"run configs/{name}.toml" for name in (
        "adversarial_digits", "adversarial_moons", "audit_corpus", "dice", "em_gmm",
        "gradient_lens", "rbm_bas", "rbm_digits", "simsiam", "softmax", "td_learning",
        "vq_vae")),
}

_COMMAND = re.compile(r"\btoolkit (run|sweep)\b([^`\n]*)")
_END = re.compile(r"\s#|&&|;|\||\s{2,}")
_CONFIG = re.compile(r"(?<![\w/.<-])(?:configs/)?([\w-]+\.toml)\b")


_parser = cache(build_parser)  # one parser reads every shown command


@dataclass(frozen=True)
class Shown:
    """One command as a reader would type it, where it is shown, and how it is run here."""

    text: str
    where: str

    @cached_property
    def args(self) -> Any:
        """The command parsed by the toolkit's own parser; ``None`` when it does not parse."""
        # a placeholder such as <printed tls:// address> is one word
        text = re.sub(r"<[^<>\n]*>", lambda m: m.group(0).replace(" ", "_"), self.text)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
            return _parser().parse_args(shlex.split(text)[1:])
        return None

    @property
    def key(self) -> str:
        """What decides the findings: the subcommand, configs, overrides, seeds, resume."""
        a = self.args
        if a is None:
            return self.text
        parts = [a.command, *a.configs, *(f"--set {o}" for o in a.overrides)]
        parts += [f"--seeds {a.seeds}"] * bool(a.seeds) + ["--resume"] * a.resume
        return " ".join(parts + ["--dry-run"] * a.dry_run)

    @property
    def skip(self) -> str:
        """Why it is not run ("" when it is)."""
        a = self.args
        if a is None:
            return ""  # a command that does not parse fails, never skips
        missing = [c for c in a.configs if not (ROOT / c).is_file()]
        if missing:
            return f"names {', '.join(missing)}, a file the reader writes first"
        return "--dry-run runs nothing" if a.dry_run else ""


def _help_texts() -> list[tuple[str, str]]:
    """``toolkit --help``, ``toolkit run --help`` and ``toolkit sweep --help``, as printed."""
    texts = []
    for argv in HELP:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main(argv)
        texts.append((f"toolkit {' '.join(argv)}", out.getvalue()))
    return texts


def _texts() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in PAGES] \
        + _help_texts()


def commands_in(text: str, where: str = "") -> list[Shown]:
    """Every ``toolkit run``/``toolkit sweep`` example of ``text`` (backslash-continued lines
    joined), each cut where the shell or the prose takes over again. A synopsis is no example:
    its first argument is not a ``.toml`` file (``toolkit run CONFIG``, the usage line's
    ``toolkit run [-h] …``, a bare ``toolkit run`` in a sentence)."""
    text = re.sub(r"[ \t]*\\\n\s*", " ", text)
    found = []
    for match in _COMMAND.finditer(text):
        rest = _END.split(match.group(2), maxsplit=1)[0].strip()
        first = next((t for t in rest.split() if not t.startswith("-")), "")
        if first.endswith(".toml"):
            found.append(Shown(f"toolkit {match.group(1)} {rest}", where))
    return found


def configs_in(text: str) -> set[str]:
    """The shipped configs ``text`` names (``configs/x.toml`` or a bare ``x.toml`` that is
    one), as ``configs/x.toml``."""
    return {f"configs/{name}" for name in _CONFIG.findall(text)
            if (ROOT / "configs" / name).is_file()}


def shown() -> list[Shown]:
    """Every command shown anywhere, then ``toolkit run CONFIG`` for each shipped config
    shown without a command of its own; one per distinct :attr:`Shown.key`."""
    commands: list[Shown] = []
    configs: dict[str, str] = {}
    for where, text in _texts():
        commands += commands_in(text, where)
        for config in sorted(configs_in(text)):
            configs.setdefault(config, where)
    named = {c for s in commands if s.args is not None for c in s.args.configs}
    commands += [Shown(f"toolkit run {c}", where) for c, where in configs.items()
                 if c not in named]
    unique: dict[str, Shown] = {}
    for s in commands:
        unique.setdefault(s.key, s)
    return list(unique.values())


SHOWN = shown()


# -- the parser


def test_the_parser_finds_the_commands_where_they_are_shown() -> None:
    text = ("Run `toolkit run configs/vq_vae.toml` (or `adversarial_moons.toml`).\n"
            "```bash\n"
            "pip install -e . && toolkit run configs/showcase.toml --seeds 0   # one seed\n"
            "toolkit sweep configs/em_gmm_sweep.toml --executor dask --address tls://H:1 \\\n"
            "    --tls-ca-file ca.pem\n"
            "```\n"
            "  toolkit sweep configs/td_learning.toml --seeds 0-4 --resume   (finish it)\n"
            "`toolkit run` checks every config; `toolkit run CONFIG --seeds 0-4` writes one "
            "folder per seed.\n")
    assert [s.text for s in commands_in(text)] == [
        "toolkit run configs/vq_vae.toml",
        "toolkit run configs/showcase.toml --seeds 0",
        "toolkit sweep configs/em_gmm_sweep.toml --executor dask --address tls://H:1 "
        "--tls-ca-file ca.pem",
        "toolkit sweep configs/td_learning.toml --seeds 0-4 --resume"]
    assert configs_in(text) == {"configs/vq_vae.toml", "configs/adversarial_moons.toml",
                                "configs/showcase.toml", "configs/em_gmm_sweep.toml",
                                "configs/td_learning.toml"}
    placeholder = Shown("toolkit sweep configs/em_gmm_sweep.toml --address <printed tls:// "
                        "address> --tls-cert cert.pem", "")
    assert placeholder.key == "sweep configs/em_gmm_sweep.toml"
    remote = Shown("toolkit sweep configs/em_gmm_sweep.toml --executor dask --address "
                   "tls://H:1 --workers 2", "")
    assert remote.key == "sweep configs/em_gmm_sweep.toml" and not remote.skip
    assert Shown("toolkit run my_probe.toml", "").skip.startswith("names my_probe.toml")
    assert Shown("toolkit run configs/td_learning.toml --dry-run", "").skip
    assert Shown("toolkit run configs/vq_vae.toml --sett x=1", "").args is None


def test_every_shown_command_parses_and_the_known_ones_are_found() -> None:
    # the toolkit's own parser accepts every command a reader is shown
    assert [(s.where, s.text) for s in SHOWN if s.args is None] == []
    keys = {s.key for s in SHOWN}
    assert KNOWN <= keys, sorted(KNOWN - keys)
    # every experiment a shown config runs has its small sizes here
    run = {_experiment(ROOT / c) for s in SHOWN if not s.skip for c in s.args.configs}
    assert run - {"showcase"} <= set(SMALL), sorted(run - {"showcase"} - set(SMALL))


# -- running them


def _experiment(path: Path) -> str:
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))["experiment"]


def _literal(value: Any) -> str:
    """A TOML literal for ``--set``."""
    return ("true" if value else "false") if isinstance(value, bool) else json.dumps(value)


def _smaller(name: str, current: dict[str, Any], swept: set[str], prefix: str,
             config: str = "") -> list[str]:
    """``--set`` overrides that shrink the sizes of one experiment's params ``current``
    (``config``: the stem of the config file, for :data:`SMALL_CONFIGS`)."""
    out = []
    for key, small in {**SMALL.get(name, {}), **SMALL_CONFIGS.get(config, {})}.items():
        if key in swept or key not in current:
            continue
        now = current[key]
        both = [v for v in (now, small) if isinstance(v, (int, float)) and not isinstance(v, bool)]
        value = min(both) if len(both) == 2 else small
        if value != now:
            out.append(f"{prefix}{key}={_literal(value)}")
    return out


def shrink(config: Path, overrides: list[str]) -> list[str]:
    """Overrides that shrink every size of ``config`` (after the command's ``overrides``);
    for the showcase, of each part it runs (its ``QUICK`` and the config's overrides)."""
    from toolkit.lab.plan.config import Plan

    spec = Plan.read(config, overrides).specs()[0]
    swept = {k.removeprefix("params.") for k in spec.sweep_point}
    params = dict(spec.config.params)
    if spec.experiment.name != "showcase":
        return _smaller(spec.experiment.name, params, swept, "params.", config.stem)
    parts = {n: e for n, e in spec.experiment.parts.items() if n != "showcase"
             and getattr(e.module, "QUICK", None) is not None}
    out = []
    for name in params["experiments"] or list(parts):
        module = parts[name].module
        current = {**module.Params().model_dump(), **module.QUICK,
                   **params["overrides"].get(name, {})}
        out += _smaller(name, current, set(), f"params.overrides.{name}.")
    return out


def _failed(folders: list[Path]) -> list[str]:
    """The findings of ``folders`` (seed groups or runs, each read alone) that did not hold."""
    from toolkit.lab import read_findings

    return [f"{folder.name}: {section}: {v.text[:160]} ({v.seeds_note})"
            for folder in folders
            for section, verdicts in read_findings(folder).items()
            for v in verdicts if v.verdict is False]


def not_as_predicted(out: Path) -> tuple[list[str], int]:
    """The findings a reader of ``out`` sees that did not hold, and how many findings files
    were read: each seed group's, and each run's that belongs to no group."""
    from toolkit.lab import SeedGroup

    groups = [p.parent for p in out.rglob("group.json")]
    grouped = {d.resolve() for g in groups for d in SeedGroup(g).run_dirs}
    alone = [p.parent for p in out.rglob("meta.json") if p.parent.resolve() not in grouped]
    return _failed([*groups, *alone]), len(groups) + len(alone)


def _seeds(command: Shown) -> set[int]:
    """The seeds ``command`` runs (its ``--seeds``, else its configs'), read without importing
    an experiment."""
    from toolkit.lab.plan.config import Plan, parse_seeds

    a = command.args
    seeds = parse_seeds(a.seeds, limit=10_000) if a.seeds else None
    return {seed for config in a.configs
            for seed in Plan.read(ROOT / config, a.overrides, seeds=seeds).seeds}


def _runs_alike(command: Shown) -> tuple[Any, ...]:
    """What decides a run of ``command`` besides its seed (the sizes are shrunk alike)."""
    a = command.args
    return a.command, tuple(a.configs), tuple(a.overrides), a.resume


def run_within(command: Shown) -> Shown | None:
    """A shown command that runs this one's single run among its seeds (``toolkit run
    configs/showcase.toml`` for ``toolkit run configs/showcase.toml --seeds 0``): the same run,
    whose findings a reader of this command reads alone; ``None`` for any other command."""
    if command.skip or command.args is None or len(seeds := _seeds(command)) != 1:
        return None
    return next((other for other in SHOWN if other is not command and not other.skip
                 and other.args is not None and _runs_alike(other) == _runs_alike(command)
                 and seeds < _seeds(other)), None)


@pytest.mark.slow
@pytest.mark.parametrize("command", SHOWN, ids=lambda s: s.key)
def test_a_shown_command_runs_small_with_no_failed_prediction(
        command: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if command.skip:
        pytest.skip(f"{command.where}: {command.skip}")
    assert command.args is not None, f"{command.where}: {command.text} does not parse"
    if (wider := run_within(command)) is not None:  # run once: that test reads it alone
        pytest.skip(f"{command.where}: its run is one of `{wider.text}`'s, whose test reads "
                    f"that run's findings alone")
    monkeypatch.delenv("TOOLKIT_EXPERIMENTS_PATH", raising=False)  # the shipped ones only
    monkeypatch.chdir(ROOT)
    a = command.args
    for config in a.configs:  # each with the overrides that shrink its own sizes
        argv = [a.command, config]
        for override in [*a.overrides, *shrink(ROOT / config, a.overrides), "device=cpu"]:
            argv += ["--set", override]
        argv += ["--seeds", a.seeds] * bool(a.seeds) + ["--resume"] * a.resume
        argv += ["--out", str(tmp_path), "--executor", "local", "--workers", "1",
                 "--no-report", "--quiet"]
        assert main(argv) == 0, f"{command.where}: {command.text}"
    failed, read = not_as_predicted(tmp_path)
    assert read > 0
    assert not failed, f"{command.where}: {command.text}\n" + "\n".join(failed)
    for narrower in [c for c in SHOWN if run_within(c) is command]:  # its run, read alone
        (seed,) = _seeds(narrower)
        alone = [p.parent for p in tmp_path.rglob("meta.json")
                 if json.loads(p.read_text(encoding="utf-8"))["seed"] == seed]
        assert alone, f"{narrower.text}: no run of seed {seed}"
        failed = _failed(alone)
        assert not failed, f"{narrower.where}: {narrower.text}\n" + "\n".join(failed)
    if a.configs == ["configs/showcase.toml"]:  # Figure 1: a panel for every experiment
        from toolkit.lab import read_findings

        for folder in {p.parent for p in tmp_path.rglob("findings.json")}:
            for section, verdicts in read_findings(folder).items():
                heads = [v for v in verdicts if v.headline is not None]
                assert len(heads) == 1, f"{section}: {len(heads)} headline findings"
